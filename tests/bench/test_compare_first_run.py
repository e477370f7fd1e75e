"""compare.py's first run: the native operators are compiled in the parent, behind one
line, before the first measuring round starts, and every line it prints fits 80 columns."""
import os
import subprocess
import sys
from pathlib import Path

from bench.compare import fit, uses_native
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]
_FAILING_CXX = "#!/bin/sh\necho 'fatal error: nothing here' >&2\nexit 1\n"


def test_fit_wraps_long_messages_to_80_columns():
    text = "compare.py: dali failed: SampleError: sample 3 (" + "/long" * 40 + "): why " * 9
    lines = fit(text).splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines)
    assert "".join(x.strip() for x in lines).replace(" ", "") == text.replace(" ", "")
    assert fit("short") == "short"


def test_only_our_dali_rows_ask_for_the_native_operators():
    assert uses_native(["torch", "dali:throughput"]) and uses_native(["adapter"])
    assert not uses_native(["torch", "classic", "dali-stock", "usual"])


def test_native_operators_are_prepared_before_any_round_and_lines_fit(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    cxx = tmp_path / "cxx"  # a fresh cache and a compiler that fails: quick, and visible
    cxx.write_text(_FAILING_CXX)
    cxx.chmod(0o755)
    env = {**os.environ, "DALI_PIPES_CACHE": str(tmp_path / "cache"),
           "DALI_PIPES_CXX": str(cxx)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--batch-size", "8", "--steps", "2", "--warmup", "1", "--size", "32",
         "--device", "cpu", "--backends", "dali,torch", "--repeats", "1"],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    err = proc.stderr.splitlines()
    building = next(i for i, x in enumerate(err) if x.startswith("building native operators"))
    first_round = err.index("dali (round 1 of 1)")
    assert building < first_round
    assert any(x.startswith("native operator policy_op unavailable") for x in err[:first_round])
    lines = proc.stdout.splitlines() + err
    assert all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
