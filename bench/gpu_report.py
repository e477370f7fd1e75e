"""The bookkeeping of `bench/gpu_check.py`: an overall deadline, a report written after every
check (so a run killed half-way still leaves every finished check on disk), and a watchdog
that ends the process cleanly when a check overruns the deadline.

A GPU machine lends a command at most 600 s; a check that hangs (a stalled pipeline, a
subprocess waiting on a lock) must not take the finished checks with it. `Deadline` clips
each subprocess's timeout to the time left; `Watchdog` writes the report with the running
check marked as overrun (and every thread's stack) and exits the process with status 3.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

EXIT_FAILED, EXIT_DEADLINE = 1, 3


class Deadline:
    """`seconds` from now on a monotonic clock."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds, self._clock = seconds, clock
        self.end = clock() + seconds

    def left(self) -> float:
        return self.end - self._clock()

    def timeout(self, want: float, keep: float = 0.0) -> float:
        """`want` seconds, or fewer when fewer are left (less `keep`, held back for later
        checks); raises RuntimeError("skip: ...") when under 2 s would be left."""
        got = min(want, self.left() - keep)
        if got < 2:
            raise RuntimeError(f"skip: {self.left():.0f} s left before the deadline, "
                               f"{keep:.0f} s of it kept for later checks")
        return got


class Report:
    """Every check's record, written as DIR/gpu_check.json and DIR/gpu_check.txt after each
    one (atomically: a reader never sees half a file)."""

    def __init__(self, out: Path, *, device: str, dry: bool, planned: list[str]):
        self.out, self.device, self.dry = out, device, dry
        self.planned, self.records = list(planned), []
        self.current: str | None = None  # the check running now
        self.t0 = time.perf_counter()
        self.lock = threading.Lock()
        out.mkdir(parents=True, exist_ok=True)

    def start(self, name: str) -> None:
        """`name` runs now (written too: a run killed from outside shows where it was)."""
        with self.lock:
            self.current = name
            self._write()

    def add(self, record: dict) -> None:
        with self.lock:
            self.records.append(record)
            self.current = None
            self._write()

    def not_run(self, reason: str) -> None:
        """Record every planned check not run yet as status "not_run"."""
        done = {r["name"] for r in self.records}
        with self.lock:
            for name in self.planned:
                if name not in done:
                    self.records.append({"name": name, "status": "not_run", "seconds": 0.0,
                                         "reason": reason})
            self._write()

    def summary(self) -> dict:
        failed = [r["name"] for r in self.records if r["status"] == "fail"]
        done = {r["name"] for r in self.records}
        return {"device": self.device, "dry": self.dry,
                "seconds": round(time.perf_counter() - self.t0, 1), "failed": failed,
                "not_run": [r["name"] for r in self.records if r["status"] == "not_run"],
                "pending": [n for n in self.planned if n not in done],
                "running": self.current, "checks": self.records}

    def text(self) -> str:
        s = self.summary()
        ok = sum(r["status"] in ("pass", "skip") for r in self.records)
        tail = (f"{ok} ok or skipped, {len(s['failed'])} failed, {len(s['not_run'])} not run, "
                f"{len(s['pending'])} pending, {s['seconds']} s")
        return table(self.records) + "\n\n" + tail

    def _write(self) -> None:
        _atomic(self.out / "gpu_check.json", json.dumps(self.summary(), indent=1, default=str))
        _atomic(self.out / "gpu_check.txt", self.text() + "\n")


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def table(records: list[dict]) -> str:
    lines = [f"{'status':7} {'s':>6}  check", "-" * 78]
    for r in records:
        note = r.get("error") or r.get("reason") or _short(r.get("result"))
        lines.append(f"{r['status']:7} {r['seconds']:6.1f}  {r['name']}")
        if note:
            lines.append(f"{'':16}{note[:300]}")
    return "\n".join(lines)


def _short(result) -> str:
    return "" if result is None else json.dumps(result, default=str)[:300]


class Watchdog:
    """At the deadline: the running check is recorded as failed (with every thread's stack),
    the rest as not run, the report written, and the process ends with EXIT_DEADLINE."""

    def __init__(self, report: Report, deadline: Deadline,
                 exit_fn: Callable[[int], None] = os._exit):
        self.report, self._exit = report, exit_fn
        self._timer = threading.Timer(max(deadline.left(), 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        name = self.report.current or "(between checks)"
        stacks = "\n".join(f"--- thread {tid}\n" + "".join(traceback.format_stack(frame))[-1500:]
                           for tid, frame in sys._current_frames().items())
        if self.report.current is not None:
            self.report.add({"name": name, "status": "fail", "seconds": 0.0,
                             "error": "the overall deadline passed while this check ran",
                             "trace": stacks[-6000:]})
        self.report.not_run("the overall deadline passed")
        print(f"\ndeadline: stopped during {name!r}; report in {self.report.out}", flush=True)
        self._exit(EXIT_DEADLINE)
