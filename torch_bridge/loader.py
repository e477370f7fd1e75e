"""The Loader every backend hands to a training loop (torch_bridge.factory.make_loader builds
it)."""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from time import perf_counter_ns
from typing import Any

import torch

from dali_pipes.launch_env import local_rank
from torch_bridge._fields import check_fields, pick
from torch_bridge._views import BatchSamplerView, DatasetView, SamplerView
from torch_bridge.errors import SampleGuard, Skipped
from torch_bridge.order.plan import EpochPlan
from torch_bridge.order.ranks import resolve_ranks
from torch_bridge.order.ray_ranks import train_ranks
from torch_bridge.order.state import (
    STATE_VERSION,
    fingerprint,
    order_differences,
    read_state,
    resume_point,
)
from torch_bridge.protocols import Engine, Modality
from torch_bridge.stats import LoaderStats, attach_sizes, check_log_every, format_line, logger


class Loader:
    """Iterates an EpochPlan through an engine (DALI or torch) and keeps the pass state.

    `len()` is the batches per epoch on this rank. A full pass advances the epoch by one;
    `set_epoch(e)` chooses the epoch of the next pass. `state_dict()` records the epoch and
    the batches yielded in it, and a loader given that state continues exactly there; a
    loader with another world size or batch size continues with what the saved ranks had
    not yet yielded of that epoch (elastic resume, see `load_state_dict`).
    With world_size > 1 every pass yields `len()` batches: one whose every sample was
    skipped comes empty (batch dimension 0); see `__iter__`, also for a second `iter()`.

    What a torch DataLoader loop reads is there too: `dataset`, `sampler`,
    `batch_sampler`, `batch_size`, `drop_last`, `num_workers`; with `fields` the batches
    are tuples (`for images, target in loader`). docs/porting.md shows a port.
    """

    def __init__(self, engine: Engine, plan: EpochPlan, guard: SampleGuard, *,
                 modality: Modality, device: torch.device, backend: str,
                 log_every: int | None = None, fields: Sequence[str] | None = None):
        self._fields = check_fields(fields)
        self._engine, self.plan, self._guard = engine, plan, guard
        self._modality, self._device = modality, device
        self._stats, self.log_every = LoaderStats(), check_log_every(log_every)
        attach_sizes(self._stats, modality)
        engine.stats = self._stats  # the engines add their stage times to it
        self.modality, self.backend = modality.name, backend
        self.epoch = 0
        self._consumed = 0  # plan batches consumed in the current pass
        self._resume_from = 0  # where the next pass starts (non-zero after load_state_dict)
        self._live_pass: _Pass | None = None  # the pass of the last iter() (see __iter__)
        self._template: dict | None = None  # field -> (dtype, shape[1:], device) for empties
        # The listing is fixed at construction; it is hashed once, on the first state_dict()
        # or load_state_dict() (a local listing stats its files then: file_stats.py).
        _listing_digest_of(modality)
        self._order_memo: tuple[dict[str, Any], str] | None = None
        # A loader dropped without close() still stops its workers / pipeline (also at exit).
        self._finalizer = weakref.finalize(self, _close, engine, modality)

    def __len__(self) -> int:
        """Batches of the current epoch on this rank, the same on every rank: a whole
        epoch's, except in an epoch that an elastic resume (a state from another world size
        or batch size) left partly done: then the batches of what is left of it, counted
        from 0, with batches already yielded since the resume included."""
        return self.plan.num_batches(self.epoch)

    @property
    def skipped(self) -> list[Skipped]:
        """Every sample left out under on_error="skip", with its file, epoch and reason."""
        return list(self._guard.skipped)

    # What torchvision ImageFolder users look for (read-only, from the modality's source).
    @property
    def classes(self) -> list[str]:
        """The class names, sorted, in label order (`batch["label"]` indexes them)."""
        return list(self._source("classes").classes)

    @property
    def class_to_idx(self) -> dict[str, int]:
        """Class name -> label, as torchvision's ImageFolder has it."""
        return {name: i for i, name in enumerate(self.classes)}

    def path(self, index: int) -> str:
        """The file of data set index `index` (`batch["index"]` holds these indices)."""
        return str(self._source("path").path(int(index)))

    # What a torch DataLoader loop reads besides the batches (torch_bridge._views).
    @property
    def dataset(self) -> DatasetView:
        """The data set: `len()` its samples (all ranks), `dataset[i]` sample i decoded as
        the torch path reads it with its label, index and path, `dataset.info(i)` the same
        without decoding (no file is read)."""
        return DatasetView(self, self._modality)

    @property
    def sampler(self) -> SamplerView:
        """This rank's indices of the current epoch: `len()` the samples this rank
        yields per epoch, `set_epoch(e)` is `loader.set_epoch(e)`."""
        return SamplerView(self)

    @property
    def batch_sampler(self) -> BatchSamplerView:
        """This rank's batches of indices of the current epoch: `len()` is `len(loader)`,
        `set_epoch(e)` is `loader.set_epoch(e)`."""
        return BatchSamplerView(self)

    @property
    def batch_size(self) -> int:
        """Samples per batch on this rank (the last batch of an epoch may hold fewer)."""
        return self.plan.batch_size

    @property
    def drop_last(self) -> bool:
        """Whether each rank's last, partial batch of an epoch is left out."""
        return self.plan.drop_last

    @property
    def num_workers(self) -> int:
        """Worker processes preparing batches: the torch backend's DataLoader workers;
        the DALI backend's feed workers (`py_num_workers` of the decode preset, "auto"
        resolved for this data: 0 means the feeds are read in this process; DALI's own
        decoding threads are the preset's `num_threads`)."""
        return self._engine.num_workers

    @property
    def engine(self) -> Engine:
        """The engine running the plan (`torch_bridge.protocols.Engine`: DALI pipelines or
        a torch DataLoader) and its `modality`: for tools that time or inspect its stages,
        as bench/stages.py does; what it holds beyond the protocol may change."""
        return self._engine

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The fields each batch is a tuple of, in order; None: batches are dicts."""
        return self._fields

    def _source(self, what: str) -> Any:
        source = self._modality.source
        if not hasattr(source, what):
            raise AttributeError(f"the {self.modality!r} loader's data has no {what}")
        return source

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch of the next pass. Setting the epoch a loaded state is in keeps
        its position, so a resumed loop may call set_epoch as usual. Choosing another epoch
        ends an elastic resume: every later epoch is a whole one."""
        if epoch != self.epoch:
            self.epoch, self._resume_from, self._consumed = int(epoch), 0, 0
            if self.plan.resumed is not None:
                self._engine.close()  # what is in flight may be of the resumed layout
                self.plan.set_resumed(None)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor] | tuple[torch.Tensor, ...]]:
        """One pass: the batches of the current epoch from the current position (dicts;
        with `fields`, tuples of those fields' tensors, in order).

        With world_size > 1 a plan batch whose every sample was skipped (on_error="skip")
        comes as an empty batch: every field of the loader's batches with batch dimension
        0 (`"index"` of length 0), so every rank yields `len(loader)` batches and DDP never
        waits on one; with a single process it is left out.

        A second `iter()` while a pass is live (started, not finished or closed) restarts
        that pass from where it started, and the earlier iterator raises RuntimeError on
        its next use: two iterators never split an epoch between them.
        """
        live = self._live_pass
        if (live is not None and live.alive() and live.epoch == self.epoch
                and self._resume_from == 0):
            epoch, start = live.epoch, live.start  # restart the live pass
        else:
            epoch, start = self.epoch, self._resume_from
        self._resume_from, self._consumed = 0, start
        token = _Pass(epoch, start)
        generator = self._run(token)
        token.generator = weakref.ref(generator)
        self._live_pass = token
        return generator

    def _run(self, token: _Pass
             ) -> Iterator[dict[str, torch.Tensor] | tuple[torch.Tensor, ...]]:
        stats, log_every = self._stats, self.log_every
        run = stats.begin(token.epoch, token.start, len(self._guard.skipped))
        finished = False
        try:
            stream = self._engine.iterate(token.epoch, token.start)
            t0 = perf_counter_ns()
            for position, batch in stream:
                self._consumed = position + 1
                if batch is None and self.plan.world_size == 1:
                    continue  # every sample skipped: left out; its wait goes to the next
                if batch is not None:
                    # batch-level work of both backends (image recipes: mixing, dtype, ...)
                    batch = self._modality.after_batch(batch, token.epoch, position)
                    self._template = {k: (v.dtype, v.shape[1:], v.device)
                                      for k, v in batch.items()}
                else:
                    batch = self._empty_batch()
                stats.batch(perf_counter_ns() - t0)
                if log_every and run is not None and run.batches % log_every == 0:
                    logger.info(format_line(self.stats()))
                yield batch if self._fields is None else pick(batch, self._fields,
                                                               self.modality)
                t0 = perf_counter_ns()
                if self._live_pass is not token:
                    raise RuntimeError(
                        f"this iterator over the loader was superseded: iter(loader) was "
                        f"called again while it was live, which restarted epoch "
                        f"{token.epoch}; use one iterator per pass")
            finished = True
        finally:
            stats.end(run, len(self._guard.skipped), finished=finished)
        self.epoch, self._consumed = token.epoch + 1, 0

    def stats(self) -> dict[str, Any]:
        """Live statistics of the pass in progress (else the last one) at the top level:
        `samples_per_s`, `wait_ms_p50` / `wait_ms_p95`, `batches`, `skipped`, `stage_ms`,
        `queue_depth`, `bytes_read`, ...; both passes under "current" and "last", totals
        since the loader was made under "total" (docs/stats.md).

        Returns:
            A new plain dict (JSON-serialisable).
        """
        return self._stats.snapshot(len(self._guard.skipped))

    def _empty_batch(self) -> dict[str, torch.Tensor]:
        """Every field of this loader's batches with batch dimension 0: shapes from the
        last real batch, else from the modality's schema (other dimensions 0)."""
        if self._template is None:
            self._template = _schema_template(self._modality, self._device)
        return {name: torch.empty((0, *shape), dtype=dtype, device=device)
                for name, (dtype, shape, device) in self._template.items()}

    def state_dict(self) -> dict[str, Any]:
        """Position (`epoch`, `batches_consumed`), the layout (`world_size`, `batch_size`,
        `drop_last`, and `resumed`: the span of the epoch's order an elastic resume left,
        else None) and `order`: what defines the epoch's global order (data set listing,
        num_samples, seed, shuffle, modality, sampler options) with its sha256
        `fingerprint`. JSON-serialisable; see torch_bridge.order.state."""
        plan = self.plan
        resumed = plan.resumed if plan.resumed is not None and \
            plan.resumed.epoch == self.epoch else None
        return {"version": STATE_VERSION, "epoch": self.epoch,
                "batches_consumed": self._consumed, "num_batches": len(self),
                "seed": plan.seed, "world_size": plan.world_size, "rank": plan.rank,
                "batch_size": plan.batch_size, "drop_last": plan.drop_last,
                "num_samples": plan.num_samples, "order": dict(self._order()[0]),
                "fingerprint": self._order()[1],
                "resumed": None if resumed is None else resumed.to_state()}

    def _order(self) -> tuple[dict[str, Any], str]:
        """(order spec, its fingerprint), computed on first use and kept."""
        if self._order_memo is None:
            order = _order_spec(self.plan, self._modality)
            self._order_memo = order, _fingerprint(order)
        return self._order_memo

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where `state` stopped, on any rank.

        A state saved under the same world size, batch size and drop_last continues at its
        batch. One saved under another (elastic resume) continues with what the old ranks
        together had not yet yielded of that epoch, sharded and batched for this loader and
        padded to even out its ranks, each sample with the augmentation it would have had;
        later epochs are whole ones. ValueError naming every field that differs when the
        state's order (data set listing, seed, shuffle, modality, sampler options) is not
        this loader's, and for a state of an unknown or newer `version` (version-1 states
        load; those without a fingerprint are checked on their per-key fields only).
        """
        saved = read_state(state)
        diffs = order_differences(saved, self.plan, self._order()[0])
        if diffs:
            raise ValueError("load_state_dict: the state does not match this loader ("
                             + "; ".join(diffs) + "); resuming would reorder data")
        resumed, start = resume_point(saved, self.plan)
        if resumed != self.plan.resumed:
            try:
                self.plan.set_resumed(resumed)
            except ValueError as exc:
                raise ValueError(f"load_state_dict: state['resumed']: {exc}") from exc
            self._engine.close()  # what is in flight belongs to the other layout
        self.epoch = saved.epoch
        self._resume_from = self._consumed = start

    def close(self) -> None:
        """Stop worker processes, release the pipeline and close the files the source keeps
        open (hyperspectral memory maps) now; a later pass reopens them. A loader that is
        garbage collected (or alive at exit) is closed the same way."""
        _close(self._engine, self._modality)

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Pass:
    """One iter() of a Loader: the epoch and batch it started from, and its generator."""

    def __init__(self, epoch: int, start: int):
        self.epoch, self.start = epoch, start
        self.generator: weakref.ref | None = None

    def alive(self) -> bool:
        """Whether its generator exists and has not finished."""
        generator = self.generator() if self.generator is not None else None
        return generator is not None and generator.gi_frame is not None


def _schema_template(modality: Modality, device: torch.device) -> dict:
    """field -> (dtype, shape[1:], device) from the modality's batch schema (every
    non-batch dimension 0)."""
    from torch_bridge import registry
    schema = registry.get(modality.name).schema(multi_source=modality.multi_source)
    return {field: (getattr(torch, dtype), (0,) * (len(layout) - 1), device)
            for field, (dtype, layout) in schema.items()}


def _close(engine: Engine, modality: Modality) -> None:
    engine.close()
    modality.source.close()


def _listing_digest(modality: Modality) -> str:
    """The source's own `listing_digest()` (names relative to their roots, sizes, mtimes and
    whatever else the source reads when it is made)."""
    return _listing_digest_of(modality)()


def _listing_digest_of(modality: Modality) -> Callable[[], str]:
    """The source's `listing_digest` method. A source without one is an error, not a weaker
    check."""
    source = modality.source
    digest = getattr(source, "listing_digest", None)
    if not callable(digest):
        raise TypeError(f"{type(source).__name__} has no listing_digest(): every source must "
                        f"state its listing so resume can check it")
    return digest


def _order_spec(plan: EpochPlan, modality: Modality) -> dict[str, Any]:
    """What defines the global order of a loader's epochs (JSON-serialisable); the layout
    (world size, batch size, drop_last) is not part of it: a state resumes across those."""
    return {"listing": _listing_digest(modality),
            "num_samples": plan.num_samples, "seed": plan.seed, "shuffle": plan.shuffle,
            "modality": modality.name,
            **(plan.sampler.describe() if plan.sampler is not None else {})}


def _fingerprint(order: dict[str, Any]) -> str:
    return fingerprint(order)


def _resolve_rank(rank: int | None, world_size: int | None, *,
                  samples: int | None = None) -> tuple[int, int]:
    """torch_bridge.order.ranks.resolve_ranks, with the process group when there is one."""
    group = train_ranks()  # a Ray Train worker without a process group: Ray's context
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        group = torch.distributed.get_rank(), torch.distributed.get_world_size()
    return resolve_ranks(rank, world_size, group=group, samples=samples)


def resolve_device(device: str | torch.device) -> torch.device:
    """A torch.device for 'cpu', 'cuda' or 'cuda:N'; ValueError for anything else. A plain
    'cuda' means this process's GPU (`_local_gpu`)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", _local_gpu())
    return dev


def _local_gpu(count: int | None = None, local: int | str | None = None) -> int:
    """The GPU a plain "cuda" means. One visible GPU (the SLURM / Kubernetes way:
    CUDA_VISIBLE_DEVICES names one GPU per process): that one, whatever LOCAL_RANK says.
    Several: LOCAL_RANK under torchrun (one GPU per process on a node), else the current
    device. `count` / `local` default to torch.cuda.device_count() / $LOCAL_RANK."""
    count = torch.cuda.device_count() if count is None else count
    if count == 1:
        return 0
    local = local_rank() if local is None else local
    if local is None:
        return torch.cuda.current_device()
    if not str(local).isdigit() or int(local) >= count:
        raise ValueError(f"LOCAL_RANK={local!r} does not name one of this process's {count} "
                         f"visible GPU(s); pass device='cuda:N', set CUDA_VISIBLE_DEVICES to "
                         f"one GPU per process, or start fewer processes per node")
    return int(local)
