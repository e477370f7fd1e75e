"""bench/gpu_check.py's bookkeeping: the deadline clips subprocess timeouts and stops the
run cleanly, the report is on disk after every check (a rerun with the same --work: in
tests/bench/test_gpu_check.py, after its dry run)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.gpu_check import run_all
from bench.gpu_report import EXIT_DEADLINE, Deadline, Report, Watchdog

ROOT = Path(__file__).resolve().parents[2]


def test_deadline_clips_timeouts_and_refuses_when_little_is_left():
    now = [100.0]
    d = Deadline(60, clock=lambda: now[0])
    assert d.timeout(240) == 60 and d.timeout(240, keep=20) == 40 and d.timeout(10) == 10
    now[0] = 159.0
    with pytest.raises(RuntimeError, match="^skip:"):
        d.timeout(30)


def test_report_is_written_after_every_check(tmp_path):
    seen = []

    def second():  # what a reader (or a killed run) finds on disk while check 2 runs
        seen.append(json.loads((tmp_path / "gpu_check.json").read_text()))
        raise AssertionError("boom")
    todo = [("one", lambda: {"x": 1}), ("two", second), ("three", lambda: None)]
    report = Report(tmp_path, device="cpu", dry=True, planned=[n for n, _ in todo])
    run_all(todo, report, Deadline(60))
    assert [r["name"] for r in seen[0]["checks"]] == ["one"]
    assert seen[0]["pending"] == ["two", "three"] and seen[0]["running"] == "two"
    final = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [r["status"] for r in final["checks"]] == ["pass", "fail", "pass"]
    assert "boom" in (tmp_path / "gpu_check.txt").read_text()


def test_checks_after_the_deadline_are_not_run(tmp_path):
    todo = [("slow", lambda: time.sleep(0.3)), ("late", lambda: None)]
    report = Report(tmp_path, device="cpu", dry=True, planned=["slow", "late"])
    run_all(todo, report, Deadline(0.2), min_left=0.0)
    final = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [(r["name"], r["status"]) for r in final["checks"]] == [("slow", "pass"),
                                                                 ("late", "not_run")]


def test_watchdog_records_the_overrunning_check_and_exits(tmp_path):
    exits, fired = [], threading.Event()
    report = Report(tmp_path, device="cpu", dry=True, planned=["hangs", "after"])
    report.start("hangs")
    with Watchdog(report, Deadline(0.2), exit_fn=lambda c: (exits.append(c), fired.set())):
        assert fired.wait(10)
    final = json.loads((tmp_path / "gpu_check.json").read_text())
    assert exits == [EXIT_DEADLINE]
    assert [(r["name"], r["status"]) for r in final["checks"]] == [("hangs", "fail"),
                                                                 ("after", "not_run")]
    assert "deadline" in final["checks"][0]["error"] and "thread" in final["checks"][0]["trace"]


def test_the_script_stops_at_its_deadline_with_a_report(tmp_path):
    run = subprocess.run([sys.executable, "bench/gpu_check.py", "--dry", "--deadline", "1",
                          "--out", str(tmp_path / "out"), "--work", str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert run.returncode == EXIT_DEADLINE, run.stdout[-2000:] + run.stderr[-2000:]
    assert report["checks"][0]["name"] == "preflight"
    assert {r["status"] for r in report["checks"][1:]} <= {"not_run", "fail"}
    assert not report["pending"] and len(report["checks"]) > 40  # every check accounted for
