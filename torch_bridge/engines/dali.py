"""Runs a modality's DALI graph over an EpochPlan and yields torch batches.

The engine feeds `external_source` inputs itself (`feed_input` + `schedule_run`), keeping
`prefetch_queue_depth` batches in flight, so it always knows which plan batch each DALI
output belongs to: resume counts batches yielded, never batches prefetched. Feeding runs
ahead across the end of an epoch into the next one (the epoch a loader moves to by
itself), so the pipeline never drains between epochs; work fed for a pass that does not
happen is taken out and dropped. At most `prefetch_queue_depth` plan batches are prepared
ahead of the consumer, wholly skipped ones included, so a data set whose every remaining
sample is bad ends its pass (each batch yielded as None, every sample in the guard's
skips) instead of preparing later epochs without end. An error preparing a batch (under
on_error="raise", or a feed worker that died) is kept with that batch and raised, naming
its epoch, when the batch's turn comes: every earlier batch is yielded first. A batch that
fails inside DALI is decoded again sample by sample to name the culprit; under
on_error="skip" the culprit is left out and the pass goes on from that batch.

Each batch's inputs come from the modality's `feeds()`: in this process, or, with
`config.py_num_workers` = N > 0, in N worker processes that prepare a window of upcoming
batches whose results are taken strictly in plan order (torch_bridge.engines._feeders, which also
says why DALI's own parallel external_source does not fit). Only modalities whose feeds
depend on nothing but (epoch, indices, known-bad samples), i.e. `SourceModality`
subclasses, go to workers; any other (the Dataset adapter) always feeds in this process.
`close()` ends the workers; so do garbage collection of the engine and interpreter exit.

With `config.pipelines` > 1 (by default 2 for a graph with an augmentation policy on the
CPU backend) the "pipeline" is a `torch_bridge.engines._pipe_ring.PipeRing`: that many DALI
pipelines of the graph take the fed batches in turn and give their outputs back in the
same order, so everything above (order, run-ahead, skips, blame, resume) is unchanged.
"""
from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import numpy as np
import torch

from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.pipelines.inputs import check_feeds
from torch_bridge.engines._autoworkers import auto_workers, start_feed_pool
from torch_bridge.engines._blame import blame, in_epoch
from torch_bridge.engines._feeders import FeedPool, FeedWindow, PlanBatch, Prepared
from torch_bridge.engines._pipe_ring import PipeRing, pipeline_count, ring_member_config
from torch_bridge.engines._transfer import attach_meta, dali_to_torch
from torch_bridge.errors import SampleError, SampleGuard, WorkerDied
from torch_bridge.protocols import BatchPlan, DaliFeed
from torch_bridge.stats import LoaderStats


@dataclass
class _Fed:
    """A prepared plan batch on its way through DALI (`scheduled` once fed and run; a batch
    with no kept sample never goes to DALI)."""

    batch: PlanBatch
    prepared: Prepared
    scheduled: bool = False

    @property
    def has_samples(self) -> bool:
        return len(self.prepared.kept) > 0


@dataclass(frozen=True)
class _Failed:
    """A plan batch whose preparation raised: the error is raised at the batch's turn."""

    batch: PlanBatch
    error: Exception


@dataclass(frozen=True)
class _Padding:
    """A repeat fed only to fill a new pipeline's first run; its output is dropped."""

    feeds: dict


_Entry = _Fed | _Failed | _Padding


class DaliEngine:
    def __init__(self, modality: DaliFeed, plan: BatchPlan, *, device: torch.device,
                 config: PipelineConfig, guard: SampleGuard, run_ahead: bool = True):
        self.modality, self.plan, self.device = modality, plan, device
        self.config, self.guard, self.run_ahead = config, guard, run_ahead
        self.dali_device: DaliDevice = "gpu" if device.type == "cuda" else "cpu"
        self._pipe: Any = None  # a DALI Pipeline or a PipeRing
        self._pending: deque[_Entry] = deque()  # prepared, in plan (and DALI output) order
        self._stream: Iterator[PlanBatch] = iter(())  # plan batches still to prepare
        self._pool: FeedPool | None = None  # feed workers (config.py_num_workers > 0)
        self._window: FeedWindow | None = None
        self.stats = LoaderStats(enabled=False)  # the Loader's, once it has one

    def build(self):
        """The pipeline, built on first use and kept across passes: one DALI pipeline, or
        (`pipeline_count` > 1) a `PipeRing` of several taking batches in turn."""
        if self._pipe is None:
            if self.dali_device == "gpu":  # pinned memory, CuPy, DALI: this GPU, not GPU 0
                torch.cuda.set_device(self._device_id())
            count = pipeline_count(self.config, self.modality, self.dali_device)
            config = self.config if count == 1 else ring_member_config(self.config, count)
            pipes = [self.modality.build_pipeline(
                device=self.dali_device, batch_size=_pipeline_batch(self.plan),
                config=config, device_id=self._device_id()) for _ in range(count)]
            pipe = pipes[0] if count == 1 else PipeRing(pipes)
            self._start_feeders()  # before DALI starts its threads: forking is safe here
            pipe.build()
            self._pipe, self._fresh = pipe, True
        return self._pipe

    def _start_feeders(self) -> None:
        if self._pool is not None or not self.modality.parallel_feeds:
            return
        workers = auto_workers(self.config.py_num_workers, self.modality, self.dali_device)
        if workers > 0:
            self._pool = start_feed_pool(lambda n: FeedPool(
                self.modality, self.guard.on_error, n, cuda_in_use=self.dali_device == "gpu"),
                self.config.py_num_workers, workers)
        if self._pool is not None:
            self._window = FeedWindow(self._pool, self.guard)
            self._finalizer = weakref.finalize(self, self._pool.close)

    @property
    def num_workers(self) -> int:
        """Feed worker processes: those running, else the count the next start gives
        (`py_num_workers`, "auto" resolved for this data); 0: feeds read in this process."""
        if self._pool is not None:
            return self._pool.workers
        if not self.modality.parallel_feeds:
            return 0
        return auto_workers(self.config.py_num_workers, self.modality, self.dali_device)

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
            self._pool = self._window = None

    def _reset(self) -> None:
        """Drop the pipeline and what is in flight; the feed workers stay."""
        self._pipe = None
        self._pending.clear()
        self._set_stream(iter(()))

    def _set_stream(self, stream: Iterator[PlanBatch]) -> None:
        if self._window is not None:
            self._window.clear()  # answers still to come from the workers are dropped
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
        except WorkerDied:  # new workers (forked before a new pipeline starts) next time
            self.close()
            raise
        except BaseException:  # a failure half-way through feeding: start clean next time
            self._reset()
            raise

    def _pass(self, epoch: int, start: int):
        """Run from batch `start`; return the batch to restart from after a skip, or None."""
        self._continue_or_restart(epoch, start)
        pipe = self.build()
        while (entry := self._next_entry(pipe, epoch)) is not None:
            if isinstance(entry, _Failed):
                raise in_epoch(entry.error, entry.batch.epoch, entry.batch.position)
            if not entry.has_samples:
                self.guard.record(entry.prepared.skips)
                yield entry.batch.position, None
                continue
            t0 = perf_counter_ns()
            try:
                outputs = self._outputs(pipe)
            except Exception as exc:  # DALI raises RuntimeError subclasses; keep the cause
                self._reset()
                self._blame(entry, exc)
                return entry.batch.position
            t1 = perf_counter_ns()
            self._top_up(pipe)  # the next batch runs while this one is consumed
            self.guard.record(entry.prepared.skips)
            t2 = perf_counter_ns()
            batch = attach_meta({name: dali_to_torch(out, self.device) for name, out
                                 in zip(self.modality.dali_outputs, outputs, strict=True)},
                                self.modality, entry.prepared.kept, self.device)
            self.stats.add("dali_run", t1 - t0)
            self.stats.add("transfer", perf_counter_ns() - t2)
            self.stats.yielded(entry.prepared.kept, len(self._pending))
            yield entry.batch.position, batch
        return None

    def _outputs(self, pipe):
        """The next outputs; on a GPU bound to torch's current stream (DALI orders them on
        it instead of making the host wait for them)."""
        if self.dali_device == "cpu":
            return pipe.outputs()
        return pipe.outputs(cuda_stream=torch.cuda.current_stream(self.device))

    def _next_entry(self, pipe, epoch: int) -> _Fed | _Failed | None:
        """Take the next entry of `epoch` (its batch scheduled if it has samples), dropping
        padding outputs on the way; None when the next one belongs to another epoch."""
        while True:
            self._top_up(pipe)
            head = self._pending[0] if self._pending else None
            if isinstance(head, _Padding):
                self._pending.popleft()
                pipe.outputs()
                continue
            if head is None or head.batch.epoch != epoch:
                return None
            self._pending.popleft()
            return head

    def _continue_or_restart(self, epoch: int, start: int) -> None:
        """Keep what is in flight if it is exactly this pass; otherwise drop it."""
        head = next((e for e in self._pending if not isinstance(e, _Padding)), None)
        if head is not None and (head.batch.epoch, head.batch.position) == (epoch, start):
            return
        self._drain()
        self._set_stream(self._plan_stream(epoch, start))

    def _plan_stream(self, epoch: int, start: int) -> Iterator[PlanBatch]:
        """This pass's batches, then (with run_ahead) the following epochs'; it ends at a
        following epoch without batches (every later one is as empty: nothing to run
        ahead into, and never a search without end)."""
        for e in itertools.count(epoch) if self.run_ahead else (epoch,):
            if e != epoch and len(self.plan) == 0:
                return
            for position, indices, keys in self.plan.keyed_batches(e, start if e == epoch
                                                                   else 0):
                yield PlanBatch(e, position, indices, keys)

    def _top_up(self, pipe) -> None:
        """Prepare up to prefetch_queue_depth batches ahead and keep as many in DALI. A
        new pipeline takes its first ones at its first schedule_run, repeated as padding
        when fewer are ready."""
        self._prepare_ahead()
        depth = self.config.prefetch_queue_depth
        waiting = [e for e in self._pending
                   if isinstance(e, _Fed) and e.has_samples and not e.scheduled]
        if not waiting:
            return
        if self._fresh:
            check_feeds(pipe.first if isinstance(pipe, PipeRing) else pipe,
                        waiting[0].prepared.feeds, type(self.modality).__name__)
            for entry in waiting:
                self._schedule(pipe, entry)
            for _ in range(depth - len(waiting)):
                padding = _Padding(waiting[-1].prepared.feeds)
                self._pending.append(padding)
                self._feed_pipe(pipe, padding.feeds)
            pipe.schedule_run()
            self._fresh = False
            return
        in_dali = sum(1 for e in self._pending
                      if isinstance(e, _Padding) or (isinstance(e, _Fed) and e.scheduled))
        for entry in waiting[:max(depth - in_dali, 0)]:
            self._schedule(pipe, entry)
            pipe.schedule_run()

    def _prepare_ahead(self) -> None:
        """Prepare the stream's next batches until `prefetch_queue_depth` are pending (the
        bound on running ahead, wholly skipped batches included) or one failed."""
        depth = self.config.prefetch_queue_depth
        while sum(1 for e in self._pending if not isinstance(e, _Padding)) < depth:
            if self._pending and isinstance(self._pending[-1], _Failed):
                return  # nothing after a failure is yielded: prepare no further
            t0 = perf_counter_ns()
            taken = self._take_prepared()
            self.stats.add("feed", perf_counter_ns() - t0)
            if taken is None:
                return
            batch, outcome = taken
            self._pending.append(_Failed(batch, outcome) if isinstance(outcome, Exception)
                                 else _Fed(batch, outcome))

    def _take_prepared(self) -> tuple[PlanBatch, Prepared | Exception] | None:
        """The stream's next batch and its outcome: from the feed workers when there are
        some, else made here; None at the stream's end."""
        if self._window is not None:
            return self._window.take(self._stream, self._prepare_here)
        batch = next(self._stream, None)
        if batch is None:
            return None
        try:
            return batch, self._prepare_here(batch)
        except Exception as exc:  # raised when the batch's turn comes
            return batch, exc

    def _prepare_here(self, batch: PlanBatch) -> Prepared:
        """One plan batch's feeds, made in this process."""
        (feeds, kept), skips = self.guard.collect_skips(
            lambda: self.modality.feeds(batch.epoch, batch.indices, self.guard, batch.keys))
        return Prepared(feeds, np.asarray(kept, np.int64), skips)

    def _schedule(self, pipe, entry: _Fed) -> None:
        self._feed_pipe(pipe, entry.prepared.feeds)
        entry.scheduled = True

    @staticmethod
    def _feed_pipe(pipe, feeds: dict) -> None:
        for name, arrays in feeds.items():
            pipe.feed_input(name, arrays)

    def _blame(self, entry: _Fed, exc: Exception) -> None:
        """Name the culprits of a batch that failed in DALI (torch_bridge.engines._blame)."""
        try:
            blame(self.modality, entry.prepared, entry.batch.epoch, exc,
                  device=self.dali_device, device_id=self._device_id(), config=self.config,
                  guard=self.guard)
        except SampleError as error:  # on_error="raise": the culprit, in its epoch
            raise in_epoch(error, entry.batch.epoch, entry.batch.position) from error

    def _drain(self) -> None:
        """Take and drop outputs fed for a pass that is not going to happen."""
        scheduled = sum(1 for e in self._pending
                        if isinstance(e, _Padding) or (isinstance(e, _Fed) and e.scheduled))
        self._pending.clear()
        if self._pipe is None or scheduled == 0:
            return
        try:
            for _ in range(scheduled):
                self._pipe.outputs()
        except Exception:  # a failing batch nobody asked for: start over with a new pipeline
            self._reset()


def _pipeline_batch(plan) -> int:
    """The pipeline's max_batch_size: the plan's largest real batch where it knows it (a
    batch_size beyond the data set must not reach DALI, which takes 31-bit sizes only)."""
    return int(getattr(plan, "largest_batch", plan.batch_size))
