"""The plain PyTorch path: Dataset + DataLoader over the same source, plan and parameters.

Workers decode with torchvision and return uint8 crops (4x less inter-process traffic
than float32); normalization runs on the target device in the consumer. The practice
article's knobs are options: `num_workers`, `prefetch_factor`, `persistent_workers`, and
`pin_memory` (on by default when the device is CUDA). Nothing starts when the engine is
made: torchvision is imported and the workers are started by the first pass.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from time import perf_counter_ns

import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

from torch_bridge.engines import _collate as collate
from torch_bridge.engines._transfer import attach_meta
from torch_bridge.engines._workers import dead_workers, shm_advice, start_workers, stop_workers
from torch_bridge.errors import OnError, SampleError, SampleGuard, SharedMemoryError, Skipped
from torch_bridge.order.plan import EpochPlan
from torch_bridge.protocols import Modality
from torch_bridge.stats import LoaderStats


@dataclass(frozen=True)
class ReferenceOptions:
    """The torch path's DataLoader options (make_loader's `reference=`, or the fields of
    `TorchBackend`): `num_workers` worker processes, each `prefetch_factor` batches ahead,
    kept across epochs with `persistent_workers`; `pin_memory` (None: on when the device
    is CUDA); `multiprocessing_context` (None: chosen when the workers start: "fork" while
    CUDA is not initialised in this process, else "forkserver"; a name forces it)."""

    num_workers: int = 2
    prefetch_factor: int = 2
    persistent_workers: bool = True
    pin_memory: bool | None = None  # None: on when the device is CUDA
    # None (default): chosen each time the workers start (engines._workers.start_method):
    # "fork", the fastest, with the garbage collector frozen so a worker never destroys a
    # DALI pipeline inherited from the parent, while CUDA is not initialised in this
    # process; "forkserver" (or "spawn") after, since a process that has initialised CUDA
    # must not fork. The modality is then pickled into the workers and scripts need an
    # `if __name__ == "__main__":` guard. A start method's name forces it.
    multiprocessing_context: str | None = None


class _PlanDataset(Dataset):
    """Keys are (epoch, index, augmentation key): the worker computes the same parameters
    as DALI does."""

    def __init__(self, modality, on_error: OnError):
        self.modality = modality
        self.on_error = on_error

    def __len__(self) -> int:
        return len(self.modality)

    def __getitem__(self, key: tuple[int, int, int]):
        epoch, index, aug_key = key
        guard = SampleGuard(self.on_error)  # raises SampleError naming the file in "raise"
        try:
            sample = guard.run(index, self.modality.path(index), epoch,
                               lambda: self.modality.load(epoch, index, aug_key))
        except SampleError as exc:  # returned, so the consumer raises it with index and path
            return index, exc, []  # (a worker's exception reaches it as text only)
        return index, sample, guard.skipped


class _PlanBatchSampler(Sampler):
    """Yields the plan's batches for the pass set by `start_pass`, as (epoch, index,
    augmentation key) keys."""

    def __init__(self, plan: EpochPlan):
        self.plan = plan
        self.epoch, self.start = 0, 0

    def __len__(self) -> int:
        return self.plan.num_batches(self.epoch) - self.start

    def __iter__(self):
        for _, indices, keys in self.plan.keyed_batches(self.epoch, self.start):
            yield [(self.epoch, int(i), int(k)) for i, k in zip(indices, keys, strict=True)]


class _Collate:
    """Stacks the good samples of a batch (padding the modality's `padded_fields`, if any,
    with `torch_bridge.engines._collate`); keeps the skip records that came with them."""

    def __init__(self, modality):
        self.modality = modality

    def __call__(self, items):
        kept: list[int] = []
        samples: list = []
        skipped: list[Skipped] = []
        for index, sample, skips in items:
            if isinstance(sample, SampleError):
                return kept, sample, skipped
            skipped.extend(skips)
            if sample is not None:
                kept.append(index)
                samples.append(sample)
        if not samples:
            return kept, None, skipped
        names = [f"{i}: {self.modality.path(i)}" for i in kept]
        padded = self.modality.padded_fields
        if padded:
            batch = collate.pad_batch(samples, padded, names)
        else:
            batch = {name: collate.stack([s[name] for s in samples], name, names)
                     for name in samples[0]}
        return kept, _in_shared_memory(batch), skipped


def _in_shared_memory(batch: dict[str, torch.Tensor]) -> dict | SharedMemoryError:
    """In a DataLoader worker: the batch moved into shared memory here, so a full /dev/shm
    fails in this thread, as data the consumer raises (left to the worker's queue thread,
    the error is only printed and the batch never arrives: the consumer waits forever)."""
    if get_worker_info() is None:
        return batch
    try:
        for tensor in batch.values():
            if isinstance(tensor, torch.Tensor):
                tensor.share_memory_()
    except RuntimeError as exc:
        if "shared memory" not in str(exc) and "No space left" not in str(exc):
            raise
        size = sum(t.numel() * t.element_size() for t in batch.values()
                   if isinstance(t, torch.Tensor))
        return SharedMemoryError(f"could not put a batch of {size / 2**20:.1f} MiB into "
                                 f"shared memory: {exc}")
    return batch


class TorchEngine:
    def __init__(self, modality: Modality, plan: EpochPlan, *, device: torch.device,
                 guard: SampleGuard, options: ReferenceOptions = ReferenceOptions()):
        self.modality, self.plan, self.device, self.guard = modality, plan, device, guard
        self.sampler = _PlanBatchSampler(plan)
        self.stats = LoaderStats(enabled=False)  # the Loader's, once it has one
        pin = options.pin_memory if options.pin_memory is not None else device.type == "cuda"
        workers = options.num_workers
        self.loader = DataLoader(
            _PlanDataset(modality, guard.on_error), batch_sampler=self.sampler,
            num_workers=workers, collate_fn=_Collate(modality), pin_memory=pin,
            prefetch_factor=options.prefetch_factor if workers > 0 else None,
            persistent_workers=options.persistent_workers and workers > 0,
            multiprocessing_context=options.multiprocessing_context if workers > 0 else None)

    @property
    def num_workers(self) -> int:
        """The DataLoader's worker processes (0: samples are read in this process)."""
        return self.loader.num_workers

    def close(self) -> None:
        stop_workers(self.loader)

    def iterate(self, epoch: int, start: int) -> Iterator[tuple[int, dict | None]]:
        self.sampler.epoch, self.sampler.start = epoch, start
        stats = self.stats
        try:
            _import_decoders()
            batches = start_workers(self.loader)
            t0 = perf_counter_ns()
            for position, (kept, stacked, skipped) in enumerate(batches, start):
                t1 = perf_counter_ns()
                stats.add("fetch", t1 - t0)
                self._record(skipped)
                if isinstance(stacked, SharedMemoryError):
                    raise shm_advice(stacked, self.loader.num_workers) from stacked
                if isinstance(stacked, SampleError):  # named like the DALI engine names it
                    raise SampleError(f"epoch {epoch}, batch {position}: {stacked}",
                                      index=stacked.index, path=stacked.path) from stacked
                if stacked is None:
                    yield position, None
                    t0 = perf_counter_ns()
                    continue
                yield position, self._finish(batches, stacked, kept, t1)
                t0 = perf_counter_ns()
        except Exception as exc:
            failure = self._failure(exc)  # (before the workers are stopped and forgotten)
            stop_workers(self.loader)
            if failure is None:
                raise
            raise failure from exc

    def _finish(self, batches, stacked: dict, kept: list[int], t1: int) -> dict:
        """The batch on the device, finished, with its metadata; its stage times, queue
        depth (batches the workers hold or prepare) and samples go to the stats."""
        batch = {k: v.to(self.device, non_blocking=True) for k, v in stacked.items()}
        t2 = perf_counter_ns()
        batch = attach_meta(self.modality.finish(batch), self.modality, kept, self.device)
        stats = self.stats
        stats.add("transfer", t2 - t1)
        stats.add("finish", perf_counter_ns() - t2)
        stats.yielded(kept, getattr(batches, "_tasks_outstanding", 0))
        return batch

    def _failure(self, exc: Exception) -> Exception | None:
        """What to raise instead of `exc` from the DataLoader, or None to raise it as it is:
        advice for a full /dev/shm; the dead worker's name when torch's queues fail after
        one died (e.g. its batch's shared memory can no longer be fetched)."""
        if isinstance(exc, (SharedMemoryError, SampleError)):
            return None
        if isinstance(exc, RuntimeError):
            text = str(exc)
            if "Bus error" in text or "shared memory" in text:  # a worker died of it
                return shm_advice(exc, self.loader.num_workers)
            return None
        dead = dead_workers(self.loader)
        if not dead:
            return None
        return RuntimeError(f"DataLoader worker ({dead}) died (killed, out of memory or "
                            f"crashed in native code) while the pass waited on it: "
                            f"{type(exc).__name__}: {exc}; iterating again starts new "
                            f"workers")

    def _record(self, skipped: list[Skipped]) -> None:
        self.guard.remember_bad({record.index: record.reason for record in skipped})
        self.guard.record(skipped)


def _import_decoders() -> None:
    """torchvision's decoders and transforms, imported in this process before the workers
    start: forked workers inherit them instead of each importing them on its first sample
    (seconds). Done at the first pass, not when the loader is made, so making a loader
    costs no more than with the DALI backend."""
    import torchvision.io  # noqa: F401
    import torchvision.transforms.v2.functional  # noqa: F401
