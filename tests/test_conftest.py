"""tests/conftest.py's `bounded`: a run past its bound ends the process with every thread's
traceback (a hang fails its test), and a run within it is left alone."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_RUN = ("import time\nfrom tests.conftest import bounded\n"
        "with bounded({bound}):\n    time.sleep({sleep})\nprint('finished')\n")


def _run(bound: float, sleep: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _RUN.format(bound=bound, sleep=sleep)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_run_past_its_bound_exits_with_the_tracebacks():
    run = _run(bound=0.5, sleep=60)
    assert run.returncode != 0 and "finished" not in run.stdout
    assert "Timeout" in run.stderr and "line 4 in <module>" in run.stderr  # the sleep


def test_a_run_within_its_bound_finishes():
    run = _run(bound=30, sleep=0)
    assert run.returncode == 0 and run.stdout.strip() == "finished", run.stderr
