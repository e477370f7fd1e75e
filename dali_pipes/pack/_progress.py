"""The pack tool's progress on the driver: shards and samples done of the total, samples/s,
MB/s (shard bytes written) and the time left, as a rich bar on a terminal or one line per
finished shard; `say` adds a line (a failed or retried task) either way."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass


@dataclass
class Totals:
    """Shards and samples of this part: all of them, and those already packed (kept)."""

    shards: int
    samples: int
    kept_shards: int = 0
    kept_samples: int = 0


def rates(samples: int, nbytes: int, seconds: float, left: int) -> str:
    """'<samples/s> samples/s, <MB/s> MB/s, ETA h:mm:ss' (pure)."""
    per_s = samples / seconds if seconds > 0 else 0.0
    eta = "?" if per_s <= 0 else _clock(left / per_s)
    return f"{per_s:.1f} samples/s, {nbytes / 1e6 / max(seconds, 1e-9):.2f} MB/s, ETA {eta}"


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    """Call `done(record)` per finished shard (a record with name, samples, bytes), `say`
    for other lines, `close` at the end. `fancy`: a rich bar (True), plain lines (False),
    or by terminal (None)."""

    def __init__(self, totals: Totals, fancy: bool | None):
        self.totals = totals
        self.shards, self.samples = totals.kept_shards, totals.kept_samples
        self.written = self.nbytes = 0
        self.start = time.monotonic()
        self.bar = None
        if (sys.stderr.isatty() if fancy is None else fancy) and self.shards < totals.shards:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
            self.bar = Progress(TextColumn("packing shards"), BarColumn(),
                                MofNCompleteColumn(), TextColumn("{task.fields[line]}"),
                                transient=False, console=Console(stderr=True))
            self.task = self.bar.add_task("", total=totals.shards, completed=self.shards,
                                          line="")
            self.bar.start()

    def started(self) -> None:
        """The work starts now (rates count from here: after an engine's start-up)."""
        self.start = time.monotonic()

    def line(self) -> str:
        t = self.totals
        return (f"{self.shards}/{t.shards} shards, {self.samples}/{t.samples} samples, "
                + rates(self.written, self.nbytes, time.monotonic() - self.start,
                        t.samples - self.samples))

    def done(self, record: dict) -> None:
        self.shards += 1
        self.samples += int(record["samples"])
        self.written += int(record["samples"])
        self.nbytes += int(record["bytes"])
        if self.bar is not None:
            self.bar.update(self.task, advance=1, line=self.line())
        else:
            print(f"packed {record['name']} ({self.line()})", file=sys.stderr)

    def say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
