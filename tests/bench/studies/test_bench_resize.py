"""bench/studies/bench_resize.py: a short run prints one row per (interpolation, size) with the
three resizes timed and the fused one closer to torchvision than DALI's fn.resize."""
import subprocess
import sys
from pathlib import Path

import pytest

from bench.studies.bench_resize import SIZES

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("fused", [True])
def test_a_short_run_prints_every_row(fused, native_ops):
    run = subprocess.run([sys.executable, "bench/studies/bench_resize.py", "--images", "3",
                          "--rounds", "1", "--reps", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.splitlines()[1:]]
    assert len(rows) == 2 * len(SIZES)
    for row in rows:
        fused_ms, dali_ms, torch_ms, fused_diff, dali_diff = map(float, row[2:])
        assert min(fused_ms, dali_ms, torch_ms) > 0
        assert fused_diff < 0.05 < dali_diff
