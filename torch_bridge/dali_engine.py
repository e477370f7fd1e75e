"""Runs a modality's DALI graph over an EpochPlan and yields torch batches.

The loader feeds `external_source` inputs itself (`feed_input` + `schedule_run`), keeping
`prefetch_queue_depth` batches in flight, so it always knows which plan batch each DALI
output belongs to: resume counts batches yielded, never batches prefetched. A batch that
fails inside DALI is decoded again sample by sample to name the culprit; under
on_error="skip" the culprit is left out and the pass goes on from that batch.
"""
from __future__ import annotations

import dataclasses
from collections import deque
from typing import Iterator

import numpy as np
import torch

from dali_pipes.pipelines.config import PipelineConfig
from torch_bridge.errors import SampleError, SampleGuard
from torch_bridge.plan import EpochPlan
from torch_bridge.transfer import attach_meta, dali_to_torch

_PADDING = object()  # marks a run scheduled only to fill DALI's first prefetch


class DaliEngine:
    def __init__(self, modality, plan: EpochPlan, *, device: torch.device,
                 config: PipelineConfig, guard: SampleGuard):
        self.modality, self.plan, self.device = modality, plan, device
        self.config, self.guard = config, guard
        self.dali_device = "gpu" if device.type == "cuda" else "cpu"
        self._pipe = None
        self._in_flight = 0  # outputs scheduled but not taken (an abandoned pass)

    def build(self):
        """The pipeline, built on first use and kept across passes."""
        if self._pipe is None:
            device_id = self.device.index if self.device.index is not None else (
                torch.cuda.current_device() if self.device.type == "cuda" else None)
            self._pipe = self.modality.build_pipeline(
                device=self.dali_device, batch_size=self.plan.batch_size,
                config=self.config, device_id=device_id)
            self._pipe.build()
            self._fresh = True
        return self._pipe

    def close(self) -> None:
        self._pipe = None
        self._in_flight = 0

    def iterate(self, epoch: int, start: int) -> Iterator[tuple[int, dict | None]]:
        """(position, batch) for each plan batch from `start`; batch None when every
        sample of it was skipped."""
        position = start
        while position is not None:
            position = yield from self._pass(epoch, position)

    def _pass(self, epoch: int, start: int):
        """Run from batch `start`; return the batch to restart from after a skip, or None."""
        self._drain()
        pipe = self.build()
        plan_batches = self.plan.batches(epoch, start)
        pending: deque = deque()
        self._fill(pipe, epoch, plan_batches, pending)
        while pending:
            position, kept, feeds, skips = pending.popleft()
            if kept is None:
                self.guard.skipped.extend(skips)
                yield position, None
                continue
            try:
                outputs = pipe.outputs()
            except Exception as exc:  # DALI raises RuntimeError subclasses; keep the cause
                self._in_flight = 0
                self.close()
                self._blame(epoch, kept, feeds, exc)
                return position
            self._in_flight -= 1
            if feeds is _PADDING:
                continue
            self.guard.skipped.extend(skips)  # recorded once, when the batch is consumed
            self._feed_one(pipe, epoch, plan_batches, pending)
            batch = {name: dali_to_torch(out, self.device)
                     for name, out in zip(self.modality.dali_outputs, outputs)}
            yield position, attach_meta(batch, self.modality, kept, self.device)
        return None

    def _fill(self, pipe, epoch: int, plan_batches, pending: deque) -> None:
        """Feed the first batches; a new pipeline needs prefetch_queue_depth up front."""
        depth = self.config.prefetch_queue_depth
        if not self._fresh:
            for _ in range(depth):
                self._feed_one(pipe, epoch, plan_batches, pending)
            return
        fed = []
        while len(fed) < depth and self._next_feeds(epoch, plan_batches, pending, fed):
            pass
        if not fed:
            return
        for _ in range(depth - len(fed)):  # an epoch shorter than the prefetch depth
            fed.append(fed[-1])
            pending.append((None, np.empty(0, np.int64), _PADDING, []))
        for feeds in fed:
            self._feed_pipe(pipe, feeds)
        pipe.schedule_run()
        self._fresh = False
        self._in_flight += depth

    def _feed_one(self, pipe, epoch: int, plan_batches, pending: deque) -> None:
        fed: list = []
        if self._next_feeds(epoch, plan_batches, pending, fed):
            self._feed_pipe(pipe, fed[0])
            pipe.schedule_run()
            self._in_flight += 1

    def _next_feeds(self, epoch: int, plan_batches, pending: deque, fed: list) -> bool:
        """Prepare the next plan batch with samples; False when the pass has no more."""
        for position, indices in plan_batches:
            mark = len(self.guard.skipped)
            feeds, kept = self.modality.feeds(epoch, indices, self.guard)
            skips = self.guard.skipped[mark:]
            del self.guard.skipped[mark:]
            if len(kept) == 0:
                pending.append((position, None, None, skips))
                continue
            pending.append((position, kept, feeds, skips))
            fed.append(feeds)
            return True
        return False

    @staticmethod
    def _feed_pipe(pipe, feeds: dict) -> None:
        for name, arrays in feeds.items():
            pipe.feed_input(name, arrays)

    def _drain(self) -> None:
        """Take and drop outputs left in flight by a pass the consumer abandoned."""
        if self._pipe is None or self._in_flight == 0:
            return
        try:
            for _ in range(self._in_flight):
                self._pipe.outputs()
            self._in_flight = 0
        except Exception:  # a failing abandoned batch: start over with a new pipeline
            self.close()

    def _blame(self, epoch: int, kept: np.ndarray, feeds: dict, exc: Exception) -> None:
        """Decode the failed batch sample by sample; raise or record the culprits."""
        probe = self.modality.build_pipeline(
            device=self.dali_device, batch_size=1, device_id=self.device.index or 0
            if self.dali_device == "gpu" else None,
            config=dataclasses.replace(self.config, num_threads=1, prefetch_queue_depth=1))
        probe.build()
        culprits = []
        for i, index in enumerate(kept.tolist()):
            for name, arrays in feeds.items():
                probe.feed_input(name, [arrays[i]])
            try:
                probe.run()
            except Exception as sample_exc:
                culprits.append((index, sample_exc))
        del probe
        if not culprits:
            files = ", ".join(self.modality.path(i) for i in kept.tolist()[:8])
            raise SampleError(f"DALI failed on a batch of epoch {epoch} but no single sample "
                              f"fails alone (files: {files}, ...): {exc}") from exc
        for index, sample_exc in culprits:  # recorded when the batch is prepared again
            self.guard.mark_bad(index, self.modality.path(index), sample_exc)
