"""A torchvision whose import fails as a mismatched build's does (a CPU torch beside a CUDA
torchvision: "operator torchvision::nms does not exist"), put first on PYTHONPATH: the doctor
names it with the fix, compare.py stops in a few lines before it forks anything, and a
measuring process that dies of it is reported with its own last error, not as an EOFError
of the fork server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ERROR = "operator torchvision::nms does not exist"


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> dict:
    """The environment of a subprocess whose `import torchvision` raises ERROR; the folder
    also holds `measured.py`, a measuring script that imports torchvision."""
    fake = tmp_path_factory.mktemp("fake")
    (fake / "torchvision").mkdir()
    (fake / "torchvision" / "__init__.py").write_text(f"raise RuntimeError({ERROR!r})\n")
    (fake / "measured.py").write_text("def main(argv):\n    import torchvision  # noqa\n"
                                      "    return 0\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def test_the_doctor_names_torchvision_and_the_fix(broken):
    proc = _run(["-m", "torch_bridge.doctor", "--json"], broken)
    report = json.loads(proc.stdout)
    row = next(c for c in report["checks"] if c["name"] == "torchvision")
    assert proc.returncode == 1 and report["ok"] is False
    assert row["status"] == "fail" and ERROR in row["detail"]
    assert row["advice"].startswith("pip install torch==") and "torchvision==" in row["advice"]


def test_compare_stops_in_a_few_lines_naming_torchvision(broken, tmp_path):
    proc = _run([str(ROOT / "bench" / "compare.py"), "--data", str(tmp_path), "--steps", "1"],
                broken)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert err[0].startswith("compare.py: torchvision: does not import") and len(err) <= 10
    assert ERROR in " ".join(x.strip() for x in err)
    assert any(x.startswith("fix: pip install torch==") for x in err), err
    assert proc.stdout == ""


def test_a_measuring_process_that_dies_reports_its_own_error(broken):
    """The fork server preloads torchvision: its RuntimeError must not end the server (the
    round would fail with "EOFError" from multiprocessing); the measuring process fails
    with its own error instead."""
    code = ("from bench.launch import run_round\n"
            "result, code, err = run_round([], lambda done: None, entry='measured')\n"
            "print(code)\nprint(err.strip().splitlines()[-1])\n")
    proc = _run(["-c", code], broken)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "EOFError" not in proc.stderr
    assert proc.stdout.splitlines() == ["1", f"RuntimeError: {ERROR}"]
