"""One progress display for every long-running command: a bar on a terminal, lines otherwise.

    with progress_bar(total=120, description="extracting frames") as bar:
        for item in items:
            ...
            bar.advance()

On a terminal (stderr is a TTY) it is a rich progress bar with the count, the rate and the
ETA. When stderr is not a terminal (a log file, CI, a pipe) it writes plain lines such as
``extracting frames: 36/120 (30%), 4.1/s, ETA 20s`` every 10% of the total or every
`every_s` seconds, whichever comes first, and a last line at the end. A total of None
(unknown) shows the count and the rate only. Uses only the standard library and rich.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


def format_eta(seconds: float | None) -> str:
    """A short duration: "45s", "3m05s", "1h02m", or "?" when unknown.

    Args:
        seconds: the remaining time, or None.
    Returns:
        The duration as text.
    """
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def progress_line(description: str, done: int, total: int | None, elapsed: float,
                  unit: str = "") -> str:
    """The plain-text progress line for `done` of `total` after `elapsed` seconds.

    Args:
        description: what is being done.
        done: items finished so far.
        total: items in all, or None when unknown.
        elapsed: seconds since the start.
        unit: the items' name, appended to the rate ("/s" alone when empty).
    Returns:
        E.g. "extracting frames: 36/120 (30%), 4.1 videos/s, ETA 20s".
    """
    rate = done / elapsed if elapsed > 0 else None
    rate_text = "?" if rate is None else f"{rate:,.1f}"
    per = f" {unit}/s" if unit else "/s"
    if not total:
        return f"{description}: {done}, {rate_text}{per}"
    eta = (total - done) / rate if rate else None
    return (f"{description}: {done}/{total} ({100 * done / total:.0f}%), {rate_text}{per}, "
            f"ETA {format_eta(eta)}")


class PlainProgress:
    """Progress as plain lines: every `every_fraction` of the total or `every_s` seconds."""

    def __init__(self, description: str, total: int | None, *, stream: IO[str],
                 every_fraction: float = 0.1, every_s: float = 5.0, unit: str = ""):
        self.description, self.total, self.unit = description, total, unit
        self.done, self._stream = 0, stream
        self._every_fraction, self._every_s = every_fraction, every_s
        self._start = self._last_time = time.monotonic()
        self._last_step = 0

    def update(self, completed: int, total: int | None = None) -> None:
        """Set the count (and the total, when it becomes known); maybe write a line."""
        if total is not None:
            self.total = total
        self.done = completed
        now = time.monotonic()
        step = max(1, int(self.total * self._every_fraction)) if self.total else None
        due_count = step is not None and self.done - self._last_step >= step
        if due_count or now - self._last_time >= self._every_s:
            self._write(now)

    def advance(self, n: int = 1) -> None:
        """Count `n` more items done."""
        self.update(self.done + n)

    def print(self, message: str) -> None:
        """Write a message line (a failure, a note) between the progress lines."""
        print(message, file=self._stream, flush=True)

    def finish(self) -> None:
        """Write the last line, unless the last one written already said the same."""
        if self.done != self._last_step or self.done == 0:
            self._write(time.monotonic())

    def _write(self, now: float) -> None:
        self._last_time, self._last_step = now, self.done
        self.print(progress_line(self.description, self.done, self.total,
                                 now - self._start, self.unit))


class NoProgress:
    """No display at all (progress turned off): counts, prints nothing."""

    def __init__(self) -> None:
        self.done = 0

    def update(self, completed: int, total: int | None = None) -> None:
        """Set the count; shows nothing."""
        self.done = completed

    def advance(self, n: int = 1) -> None:
        """Count `n` more items done; shows nothing."""
        self.done += n

    def print(self, message: str) -> None:
        """Drop the message (the caller reports outcomes itself)."""

    def finish(self) -> None:
        """Nothing to close."""


class RichProgress:
    """Progress as a rich bar on the terminal: count, rate, elapsed time and ETA."""

    def __init__(self, description: str, total: int | None, *, stream: IO[str],
                 unit: str = "", transient: bool = False):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        per = f" {unit}/s" if unit else "/s"
        rate = TextColumn("{task.fields[rate]}" + per)
        self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TaskProgressColumn(), rate, TimeElapsedColumn(), TextColumn("ETA"),
                           TimeRemainingColumn(), console=Console(file=stream),
                           transient=transient)
        self._task = self._p.add_task(description, total=total, rate="?")
        self._start = time.monotonic()
        self.done = 0
        self._p.start()

    def update(self, completed: int, total: int | None = None) -> None:
        """Set the count (and the total, when it becomes known)."""
        self.done = completed
        elapsed = time.monotonic() - self._start
        rate = f"{completed / elapsed:,.1f}" if elapsed > 0 else "?"
        # rich leaves the total as it is when given None
        self._p.update(self._task, total=total, completed=completed, rate=rate)

    def advance(self, n: int = 1) -> None:
        """Count `n` more items done."""
        self.update(self.done + n)

    def print(self, message: str) -> None:
        """Print a message above the bar."""
        self._p.console.print(message, markup=False, highlight=False)

    def finish(self) -> None:
        """Stop the bar (it stays on screen unless transient)."""
        self._p.stop()


@contextmanager
def progress_bar(total: int | None, description: str, *, stream: IO[str] | None = None,
                 unit: str = "", every_fraction: float = 0.1, every_s: float = 5.0,
                 terminal: bool | None = None, transient: bool = False,
                 enabled: bool = True) -> Iterator[PlainProgress | RichProgress | NoProgress]:
    """A progress display: a rich bar on a terminal, plain lines elsewhere.

    Args:
        total: items in all, or None when unknown (update(..., total=) may set it later).
        description: what is being done, e.g. "extracting frames".
        stream: where to write (default sys.stderr, so stdout stays for results).
        unit: the items' name shown with the rate ("videos" -> "4.1 videos/s").
        every_fraction: plain lines: write one every this fraction of the total.
        every_s: plain lines: also write one when this many seconds passed without one.
        terminal: force the bar (True) or the lines (False); default: stream.isatty().
        transient: remove the bar from the terminal when done.
        enabled: False shows nothing at all (print() is dropped too).
    Returns:
        A context manager yielding an object with update(completed, total=None),
        advance(n=1) and print(message).
    """
    stream = sys.stderr if stream is None else stream
    if terminal is None:
        terminal = bool(getattr(stream, "isatty", lambda: False)())
    bar: PlainProgress | RichProgress | NoProgress
    if not enabled:
        bar = NoProgress()
    elif terminal:
        bar = RichProgress(description, total, stream=stream, unit=unit, transient=transient)
    else:
        bar = PlainProgress(description, total, stream=stream, unit=unit,
                            every_fraction=every_fraction, every_s=every_s)
    try:
        yield bar
    finally:
        bar.finish()
