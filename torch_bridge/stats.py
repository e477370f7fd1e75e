"""Live loader statistics: counters cheap enough to leave on (`Loader.stats()`).

Per batch the loader reads the clock twice around the engine's yield (the data wait of a
training step) and the engines read it at their stage boundaries; each reading adds to an
integer. Wait times for the percentiles go into a fixed-size ring, so memory stays bounded
however long a pass is. Nothing here runs per sample. The overhead is measured in
docs/stats.md.

Stages, where the backend can tell:
- DALI backend: `feed` (reading and preparing a batch's inputs in Python, or taking them
  from the feed workers), `dali_run` (waiting on the pipeline's outputs), `transfer`
  (DALI outputs to torch tensors on the device, with the batch's metadata).
- torch backend: `fetch` (waiting on the DataLoader: workers read, decode, collate),
  `transfer` (the batch to the device) and `finish` (the modality's finishing step on the
  device, e.g. normalization, with the batch's metadata).
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import numpy as np

logger = logging.getLogger("torch_bridge")

WAIT_RING = 4096  # wait times kept per pass for the percentiles (the most recent ones)


class PassStats:
    """The counters of one pass (one iter() of a loader)."""

    __slots__ = ("epoch", "start_batch", "t_start", "t_end", "batches", "samples",
                 "bytes_read", "skipped_mark", "skipped_end", "waits", "wait_ns", "stages",
                 "depth_sum", "depth_last", "finished")

    def __init__(self, epoch: int, start_batch: int, skipped_mark: int):
        self.epoch, self.start_batch, self.skipped_mark = epoch, start_batch, skipped_mark
        self.t_start = perf_counter_ns()
        self.t_end: int | None = None
        self.batches = self.samples = self.bytes_read = self.wait_ns = 0
        self.skipped_end: int | None = None
        self.waits = np.zeros(WAIT_RING, np.int64)
        self.stages: dict[str, int] = {}
        self.depth_sum = self.depth_last = 0
        self.finished = False

    def summary(self, skipped_now: int) -> dict[str, Any]:
        """The pass's numbers as a plain dict (times in ms)."""
        end = self.t_end if self.t_end is not None else perf_counter_ns()
        wall_s = max(end - self.t_start, 1) / 1e9
        kept = self.waits[:min(self.batches, WAIT_RING)]
        p50, p95 = (np.percentile(kept, [50, 95]) / 1e6).tolist() if len(kept) else (0.0, 0.0)
        skipped_end = self.skipped_end if self.skipped_end is not None else skipped_now
        return {"epoch": self.epoch, "start_batch": self.start_batch,
                "finished": self.finished, "batches": self.batches,
                "samples": self.samples, "skipped": skipped_end - self.skipped_mark,
                "wall_s": wall_s, "samples_per_s": self.samples / wall_s,
                "wait_ms_p50": p50, "wait_ms_p95": p95, "wait_ms_total": self.wait_ns / 1e6,
                "stage_ms": {k: v / 1e6 for k, v in self.stages.items()},
                "queue_depth": self.depth_last,
                "queue_depth_mean": self.depth_sum / self.batches if self.batches else 0.0,
                "bytes_read": self.bytes_read}


class LoaderStats:
    """The current and the last pass of a loader, plus totals since it was made.

    Engines call `add(stage, ns)` and `yielded(indices, in_flight)`; the loader calls
    `begin`, `batch` and `end`. With `enabled` False every call returns at once (used to
    measure the cost).
    """

    def __init__(self, *, enabled: bool = True):
        self.enabled = enabled
        self.sizes: np.ndarray | None = None  # bytes per sample index (sample_bytes)
        # Or the sizes of given indices, asked when a pass ends (a listing that stats its
        # files on first use: only the samples yielded are stat'ed); the batches yielded
        # until then wait in `_pending` (one epoch's indices at most).
        self.sizes_later: Callable[[np.ndarray], np.ndarray] | None = None
        self._pending: list[tuple[PassStats, np.ndarray]] = []
        self.current: PassStats | None = None
        self.last: PassStats | None = None
        self._ended = _totals(None)  # the passes that ended, summed (see `totals`)

    def begin(self, epoch: int, start_batch: int, skipped_mark: int) -> PassStats | None:
        """A pass starts; an unfinished current pass (abandoned, restarted) becomes last.

        Returns:
            The pass's counters (None when disabled), to hand back to `end`.
        """
        if not self.enabled:
            return None
        if self.current is not None:
            self.end(self.current, skipped_mark, finished=False)
        self.current = PassStats(epoch, start_batch, skipped_mark)
        return self.current

    def end(self, run: PassStats | None, skipped_now: int, *, finished: bool) -> None:
        """Pass `run` ended (`finished`: it reached the end of its epoch); nothing when it
        is no longer the current one (a superseded iterator closed late)."""
        if run is None or run is not self.current:
            return
        if not sys.is_finalizing():  # a pass closed at exit stats no files (lazy sizes)
            self._settle()
        run.t_end, run.finished, run.skipped_end = perf_counter_ns(), finished, skipped_now
        self.last, self.current = run, None
        self._ended = _totals(run, self._ended)

    def batch(self, wait_ns: int) -> None:
        """A batch reached the consumer after `wait_ns` in the engine."""
        current = self.current
        if current is None:
            return
        current.waits[current.batches % WAIT_RING] = wait_ns
        current.batches += 1
        current.wait_ns += wait_ns

    def yielded(self, indices, in_flight: int) -> None:
        """An engine yields a batch of these sample indices (numpy int array or list) with
        `in_flight` batches prepared or running behind it (the queue depth)."""
        current = self.current
        if current is None:
            return
        current.samples += len(indices)
        if self.sizes is not None and len(indices):
            current.bytes_read += int(self.sizes[indices].sum())
        elif self.sizes_later is not None and len(indices):
            self._pending.append((current, np.asarray(indices)))
        current.depth_last = in_flight
        current.depth_sum += in_flight

    def _settle(self) -> None:
        """Count the bytes of the batches that waited for `sizes_later`."""
        if self.sizes_later is None:
            return
        pending, self._pending = self._pending, []
        for run, indices in pending:
            run.bytes_read += int(self.sizes_later(indices).sum())

    def add(self, stage: str, ns: int) -> None:
        """Time spent in an engine stage for the current pass."""
        current = self.current
        if current is not None:
            current.stages[stage] = current.stages.get(stage, 0) + ns

    def totals(self) -> dict[str, Any]:
        """Counts since the loader was made, over every pass (the current one included):
        `batches`, `samples`, `wait_ms`, `bytes_read`, `stage_ms`. Cheap (no percentiles):
        differences of two readings give the numbers of the steps between them."""
        self._settle()
        return _totals(self.current, self._ended) if self.current is not None \
            else dict(self._ended, stage_ms=dict(self._ended["stage_ms"]))

    def snapshot(self, skipped_now: int) -> dict[str, Any]:
        """The dict `Loader.stats()` returns: the current pass's numbers at the top level
        (the last pass's when none is in progress), and both under "current" / "last"
        (None when there is no such pass)."""
        self._settle()
        current = self.current.summary(skipped_now) if self.current is not None else None
        last = self.last.summary(skipped_now) if self.last is not None else None
        top = current if current is not None else last
        if top is None:
            top = PassStats(0, 0, skipped_now).summary(skipped_now)
            top.update(wall_s=0.0, samples_per_s=0.0)
        out = {**top, "current": current, "last": last, "total": self.totals(),
               "enabled": self.enabled}
        if self.sizes is None and self.sizes_later is None:  # None, not a count of 0
            for part in (out, current, last, out["total"]):
                if part is not None:
                    part["bytes_read"] = None
        return out


def _totals(run: PassStats | None, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """`base` (totals) plus the counts of `run`, as a new dict."""
    out: dict[str, Any] = {"batches": 0, "samples": 0, "wait_ms": 0.0, "bytes_read": 0,
                           "stage_ms": {}} \
        if base is None else dict(base, stage_ms=dict(base["stage_ms"]))
    if run is not None:
        out["batches"] += run.batches
        out["samples"] += run.samples
        out["wait_ms"] += run.wait_ns / 1e6
        out["bytes_read"] += run.bytes_read
        for stage, ns in run.stages.items():
            out["stage_ms"][stage] = out["stage_ms"].get(stage, 0.0) + ns / 1e6
    return out


def check_log_every(log_every) -> int | None:
    """`log_every` validated: a positive int or None (ValueError naming the option)."""
    if log_every is None:
        return None
    if isinstance(log_every, bool) or not isinstance(log_every, (int, np.integer)) \
            or log_every < 1:
        raise ValueError(f"log_every must be a positive int (batches) or None, got "
                         f"{log_every!r}")
    return int(log_every)


def format_line(stats: dict[str, Any]) -> str:
    """One log line of a `Loader.stats()` dict."""
    stages = " ".join(f"{k}={v:.1f}ms" for k, v in stats["stage_ms"].items())
    return (f"epoch {stats['epoch']} batch {stats['start_batch'] + stats['batches']}: "
            f"{stats['samples_per_s']:.1f} samples/s, wait p50 {stats['wait_ms_p50']:.2f} ms "
            f"p95 {stats['wait_ms_p95']:.2f} ms, skipped {stats['skipped']}, queue depth "
            f"{stats['queue_depth']}"
            + (f", read {stats['bytes_read'] / 2**20:.1f} MiB"
               if stats["bytes_read"] is not None else "")
            + (f", stages {stages}" if stages else ""))


def write_tensorboard(writer, stats: dict[str, Any], step: int, *,
                      prefix: str = "loader") -> None:
    """Write the numbers of a `Loader.stats()` dict as scalars to a TensorBoard writer.

    Args:
        writer: a `torch.utils.tensorboard.SummaryWriter` (anything with `add_scalar`).
        stats: what `loader.stats()` returned.
        step: the global step to write them at.
        prefix: the tag prefix ("loader/samples_per_s", "loader/stage_ms/feed", ...).

    Returns:
        None.
    """
    for key in ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "batches", "skipped",
                "queue_depth", "bytes_read"):
        if stats[key] is not None:  # bytes_read: None where the source lists no sizes
            writer.add_scalar(f"{prefix}/{key}", float(stats[key]), step)
    for stage, ms in stats["stage_ms"].items():
        writer.add_scalar(f"{prefix}/stage_ms/{stage}", float(ms), step)


def sample_bytes_known(modality) -> bool:
    """Whether the source's listing has one size per sample (sources that read whole
    files), without taking lazy stats."""
    source = getattr(modality, "source", None)
    listing = getattr(source, "listing", None)
    return source is not None and hasattr(type(listing), "sizes") and \
        len(getattr(listing, "files", ())) == len(source)


def sample_bytes(modality) -> np.ndarray | None:
    """Bytes of each sample's file (the source's listing sizes), for sources that read
    whole files; None when the source does not list sizes."""
    source = getattr(modality, "source", None)
    sizes = getattr(getattr(source, "listing", None), "sizes", None)
    if sizes is None or source is None or len(sizes) != len(source):
        return None
    return np.maximum(np.asarray(sizes, np.int64), 0)  # -1: gone since the listing


def attach_sizes(stats: LoaderStats, modality) -> None:
    """Give `stats` the sample sizes of `modality`'s source: now when its listing holds
    them, else (a listing that stats its files on first use) those of the samples yielded,
    when a pass ends (no pass stats the whole listing)."""
    file_stats = getattr(getattr(getattr(modality, "source", None), "listing", None),
                         "stats", None)
    if getattr(file_stats, "taken", True):
        stats.sizes = sample_bytes(modality)
    elif file_stats is not None and sample_bytes_known(modality):
        stats.sizes_later = lambda indices: np.maximum(file_stats.sizes_of(indices), 0)
