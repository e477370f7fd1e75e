"""Runs a modality's DALI graph over an EpochPlan and yields torch batches.

The engine feeds `external_source` inputs itself (`feed_input` + `schedule_run`), keeping
`prefetch_queue_depth` batches in flight, so it always knows which plan batch each DALI
output belongs to: resume counts batches yielded, never batches prefetched. Feeding runs
ahead across the end of an epoch into the next one (the epoch a loader moves to by
itself), so the pipeline never drains between epochs; work fed for a pass that does not
happen is taken out and dropped. A batch that fails inside DALI is decoded again sample
by sample to name the culprit; under on_error="skip" the culprit is left out and the pass
goes on from that batch.

Each batch's inputs come from the modality's `feeds()`: in this process, or, with
`config.py_num_workers` = N > 0, in N worker processes that prepare a window of upcoming
batches whose results are taken strictly in plan order (torch_bridge.feeders, which also
says why DALI's own parallel external_source does not fit). Only modalities whose feeds
depend on nothing but (epoch, indices, known-bad samples), i.e. `SourceModality`
subclasses, go to workers; any other (the Dataset adapter) always feeds in this process.
`close()` ends the workers; so do garbage collection of the engine and interpreter exit.
"""
from __future__ import annotations

import dataclasses
import itertools
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch

from dali_pipes.pipelines.config import PipelineConfig
from torch_bridge.autoworkers import auto_workers, start_feed_pool
from torch_bridge.errors import SampleError, SampleGuard, Skipped
from torch_bridge.feeders import BrokenProcessPool, FeedPool, known_bad_for
from torch_bridge.modalities.base import SourceModality
from torch_bridge.plan import EpochPlan
from torch_bridge.transfer import attach_meta, dali_to_torch


@dataclass
class _Fed:
    """One plan batch on its way through DALI (kept is None: every sample was skipped)."""

    epoch: int
    position: int
    kept: np.ndarray | None
    feeds: dict = field(repr=False)
    skips: list[Skipped]  # recorded in the guard when the batch is consumed
    padding: bool = False  # a repeat that only fills a new pipeline's first prefetch


class DaliEngine:
    def __init__(self, modality, plan: EpochPlan, *, device: torch.device,
                 config: PipelineConfig, guard: SampleGuard, run_ahead: bool = True):
        self.modality, self.plan, self.device = modality, plan, device
        self.config, self.guard, self.run_ahead = config, guard, run_ahead
        self.dali_device = "gpu" if device.type == "cuda" else "cpu"
        self._pipe = None
        self._pending: deque[_Fed] = deque()  # fed, in DALI's output order
        self._stream = iter(())  # (epoch, position, indices) still to feed
        self._pool: FeedPool | None = None  # feed workers (config.py_num_workers > 0)
        self._window: deque = deque()  # ((epoch, position, indices), known bad, future)

    def build(self):
        """The pipeline, built on first use and kept across passes."""
        if self._pipe is None:
            pipe = self.modality.build_pipeline(
                device=self.dali_device, batch_size=self.plan.batch_size,
                config=self.config, device_id=self._device_id())
            self._start_feeders()  # before DALI starts its threads: forking is safe here
            pipe.build()
            self._pipe, self._fresh = pipe, True
        return self._pipe

    def _start_feeders(self) -> None:
        if self._pool is not None or not isinstance(self.modality, SourceModality):
            return
        workers = auto_workers(self.config.py_num_workers, self.modality, self.dali_device)
        if workers > 0:
            self._pool = start_feed_pool(lambda n: FeedPool(
                self.modality, self.guard.on_error, n, cuda_in_use=self.dali_device == "gpu"),
                self.config.py_num_workers, workers)
        if self._pool is not None:
            self._finalizer = weakref.finalize(self, self._pool.close)

    def _device_id(self) -> int | None:
        if self.dali_device == "cpu":
            return None
        return self.device.index if self.device.index is not None else \
            torch.cuda.current_device()

    def close(self) -> None:
        """Drop the pipeline and what is in flight, and end the feed workers (a later pass
        starts them again)."""
        self._reset()
        if self._pool is not None:
            self._finalizer()  # FeedPool.close, once
            self._pool = None

    def _reset(self) -> None:
        """Drop the pipeline and what is in flight; the feed workers stay."""
        self._pipe = None
        self._pending.clear()
        self._set_stream(iter(()))

    def _set_stream(self, stream) -> None:
        for _, _, future in self._window:
            future.cancel()  # a running one finishes in its worker; its result is dropped
        self._window.clear()
        self._stream = stream

    def iterate(self, epoch: int, start: int) -> Iterator[tuple[int, dict | None]]:
        """(position, batch) for each plan batch of `epoch` from `start`; batch None when
        every sample of it was skipped."""
        position = start
        try:
            while position is not None:
                position = yield from self._pass(epoch, position)
        except GeneratorExit:  # the consumer stopped between batches: the state is whole
            raise
        except BaseException:  # a failure half-way through feeding: start clean next time
            self._reset()
            raise

    def _pass(self, epoch: int, start: int):
        """Run from batch `start`; return the batch to restart from after a skip, or None."""
        self._continue_or_restart(epoch, start)
        pipe = self.build()
        self._top_up(pipe)
        while self._pending and self._pending[0].epoch == epoch:
            fed = self._pending.popleft()  # padding (epoch -1) never matches: drained later
            if fed.kept is None:
                self.guard.skipped.extend(fed.skips)
                yield fed.position, None
                continue
            try:
                outputs = pipe.outputs()
            except Exception as exc:  # DALI raises RuntimeError subclasses; keep the cause
                self._reset()
                self._blame(fed, exc)
                return fed.position
            self._top_up(pipe)
            self.guard.skipped.extend(fed.skips)
            batch = {name: dali_to_torch(out, self.device)
                     for name, out in zip(self.modality.dali_outputs, outputs)}
            yield fed.position, attach_meta(batch, self.modality, fed.kept, self.device)
        return None

    def _continue_or_restart(self, epoch: int, start: int) -> None:
        """Keep what is in flight if it is exactly this pass; otherwise drop it."""
        head = self._pending[0] if self._pending else None
        if head is not None and (head.epoch, head.position) == (epoch, start):
            return
        self._drain()
        self._set_stream(self._plan_stream(epoch, start))

    def _plan_stream(self, epoch: int, start: int):
        """This pass's batches, then (with run_ahead) the following epochs'."""
        for e in itertools.count(epoch) if self.run_ahead else (epoch,):
            for position, indices, keys in self.plan.keyed_batches(e, start if e == epoch
                                                                   else 0):
                yield e, position, indices, keys

    def _top_up(self, pipe) -> None:
        """Keep prefetch_queue_depth batches in flight. A new pipeline takes them all at
        its first schedule_run; when fewer remain, the last one is repeated as padding."""
        depth = self.config.prefetch_queue_depth
        in_flight = sum(1 for fed in self._pending if fed.kept is not None)
        batch = [fed for fed in (self._next_fed() for _ in range(depth - in_flight)) if fed]
        if not self._fresh:
            for fed in batch:
                self._feed_pipe(pipe, fed)
                pipe.schedule_run()
            return
        if not batch:
            return
        while len(batch) < depth:
            batch.append(dataclasses.replace(batch[-1], epoch=-1, skips=[], padding=True))
            self._pending.append(batch[-1])
        for fed in batch:
            self._feed_pipe(pipe, fed)
        pipe.schedule_run()
        self._fresh = False

    def _next_fed(self) -> _Fed | None:
        """Prepare the next plan batch that has samples (recording all-skipped ones)."""
        while (item := self._next_prepared()) is not None:
            (epoch, position, *_), (feeds, kept, skips) = item
            fed = _Fed(epoch, position, kept if len(kept) else None, feeds, skips)
            self._pending.append(fed)
            if fed.kept is not None:
                return fed
        return None

    def _next_prepared(self):
        """((epoch, position, indices, keys), (feeds, kept, skips)) of the stream's next batch,
        or None at its end: from the feed workers when there are some, else made here."""
        if self._pool is None:
            item = next(self._stream, None)
            return None if item is None else (item, self._prepare_here(item))
        try:
            self._fill_window()
            if not self._window:
                return None
            item, bad, future = self._window.popleft()
            if known_bad_for(self.guard, item[2]) != bad:  # a sample went bad since: redo
                future.cancel()
                return item, self._prepare_here(item)
            feeds, kept, skips, new_bad = future.result()
        except BrokenProcessPool as exc:
            self.close()
            raise RuntimeError("a feed worker process died (killed, out of memory or crashed "
                               "in native code) while preparing a batch of the pass; "
                               "iterating again starts new workers") from exc
        self.guard.known_bad.update(new_bad)
        return item, (feeds, kept, skips)

    def _fill_window(self) -> None:
        """Send the stream's next batches to the feed workers, up to twice their number,
        each with the known-bad entries of its indices (checked again when it is taken)."""
        while len(self._window) < 2 * self._pool.workers:
            item = next(self._stream, None)
            if item is None:
                return
            bad = known_bad_for(self.guard, item[2])
            self._window.append((item, bad, self._pool.submit(item[0], item[2], item[3], bad)))

    def _prepare_here(self, item):
        """(feeds, kept, skips) of one plan batch, made in this process."""
        epoch, _, indices, keys = item
        mark = len(self.guard.skipped)
        feeds, kept = self.modality.feeds(epoch, indices, self.guard, keys)
        skips = self.guard.skipped[mark:]
        del self.guard.skipped[mark:]
        return feeds, kept, skips

    @staticmethod
    def _feed_pipe(pipe, fed: _Fed) -> None:
        for name, arrays in fed.feeds.items():
            pipe.feed_input(name, arrays)

    def _drain(self) -> None:
        """Take and drop outputs fed for a pass that is not going to happen."""
        scheduled = sum(1 for fed in self._pending if fed.kept is not None)
        self._pending.clear()
        if self._pipe is None or scheduled == 0:
            return
        try:
            for _ in range(scheduled):
                self._pipe.outputs()
        except Exception:  # a failing batch nobody asked for: start over with a new pipeline
            self._reset()

    def _blame(self, fed: _Fed, exc: Exception) -> None:
        """Decode the failed batch sample by sample; raise or remember the culprits."""
        probe = self.modality.build_pipeline(
            device=self.dali_device, batch_size=1, device_id=self._device_id(),
            config=dataclasses.replace(self.config, num_threads=1, prefetch_queue_depth=1))
        probe.build()
        culprits = []
        for i, index in enumerate(fed.kept.tolist()):
            for name, arrays in fed.feeds.items():
                probe.feed_input(name, [arrays[i]])
            try:
                probe.run()
            except Exception as sample_exc:
                culprits.append((index, sample_exc))
        del probe
        if not culprits:
            files = ", ".join(self.modality.path(i) for i in fed.kept.tolist()[:8])
            raise SampleError(f"DALI failed on a batch of epoch {fed.epoch} but no single "
                              f"sample fails alone (files: {files}, ...): {exc}") from exc
        for index, sample_exc in culprits:  # recorded when the batch is prepared again
            self.guard.mark_bad(index, self.modality.path(index), sample_exc)
