"""bench/studies/bench_jpeg_partial.py: a short run prints one JSON row per image set with
every variant timed and the crop decoder's pixels equal to DALI's decoder + the resize."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("fused", [True])
def test_a_short_run_prints_every_set(fused, native_ops):
    from dali_pipes import native
    if native.library("decode_crop_op") is None:
        pytest.skip(f"DpDecodeCropResize unavailable: {native.why_not('decode_crop_op')}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    real = importlib.util.find_spec("skimage") is not None  # the real photos' sources
    run = subprocess.run([sys.executable, "bench/studies/bench_jpeg_partial.py", "--images",
                          "16", "--rounds", "1", *(["--real"] if real else [])], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [r["set"] for r in rows] == ["built-in 500x375", "ImageNet-like 200-640 px",
                                        *(["real crops 200-640 px"] if real else [])]
    for row in rows:
        assert set(row["cpu_ms"]) == {"dali", "partial", "partial+dct8", "ceiling-fast",
                                      "ceiling-exact", "entropy-floor"}
        assert min(row["cpu_ms"].values()) > 0
        same = row["agreement"]["partial-vs-dali"]
        assert same["max"] == 0 and same["differing"] == 0
        assert row["agreement"]["partial-vs-torchvision"]["mean"] < 0.05
