"""The Loader every backend hands to a training loop (torch_bridge.factory.make_loader builds
it; importing make_loader from here keeps working)."""
from __future__ import annotations

import os
import warnings
import weakref
from typing import Any, Iterator

import torch

from torch_bridge.errors import SampleGuard, Skipped
from torch_bridge.plan import EpochPlan
from torch_bridge.protocols import Engine
from torch_bridge.state import (STATE_VERSION, fingerprint, order_differences, read_state,
                                resume_point)


class Loader:
    """Iterates an EpochPlan through an engine (DALI or torch) and keeps the pass state.

    `len()` is the batches per epoch on this rank. A full pass advances the epoch by one;
    `set_epoch(e)` chooses the epoch of the next pass. `state_dict()` records the epoch and
    the batches yielded in it, and a loader given that state continues exactly there; a
    loader with another world size or batch size continues with what the saved ranks had
    not yet yielded of that epoch (elastic resume, see `load_state_dict`).
    """

    def __init__(self, engine: Engine, plan: EpochPlan, guard: SampleGuard, *, modality: str,
                 backend: str):
        self._engine, self.plan, self._guard = engine, plan, guard
        self.modality, self.backend = modality, backend
        self.epoch = 0
        self._consumed = 0  # plan batches consumed in the current pass
        self._resume_from = 0  # where the next pass starts (non-zero after load_state_dict)
        # The listing is fixed at construction: hash it once, not on every state_dict().
        self._order = _order_spec(plan, getattr(engine, "modality", None), modality)
        self._fingerprint = _fingerprint(self._order)
        # Batch-level work shared by both backends (image recipes: mixing, output format).
        self._after = getattr(getattr(engine, "modality", None), "after_batch", None)
        # A loader dropped without close() still stops its workers / pipeline (also at exit).
        self._finalizer = weakref.finalize(self, _close_engine, engine)

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

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch of the next pass. Setting the epoch a loaded state is in keeps
        its position, so a resumed loop may call set_epoch as usual. Choosing another epoch
        ends an elastic resume: every later epoch is a whole one."""
        if epoch != self.epoch:
            self.epoch, self._resume_from, self._consumed = int(epoch), 0, 0
            if self.plan.resumed is not None:
                self._engine.close()  # what is in flight may be of the resumed layout
                self.plan.set_resumed(None)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        epoch, start = self.epoch, self._resume_from
        self._resume_from, self._consumed = 0, start
        for position, batch in self._engine.iterate(epoch, start):
            self._consumed = position + 1
            if batch is not None:
                yield batch if self._after is None else self._after(batch, epoch, position)
            elif self.plan.world_size > 1:
                warnings.warn(
                    f"rank {self.plan.rank}: every sample of batch {position} of epoch {epoch} "
                    f"was skipped (on_error='skip'), so this rank yields one batch fewer than "
                    f"len(loader) this epoch; ranks that wait on each other (DDP) may hang. "
                    f"loader.skipped names the files", RuntimeWarning, stacklevel=2)
        self.epoch, self._consumed = epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        """Position (`epoch`, `batches_consumed`), the layout (`world_size`, `batch_size`,
        `drop_last`, and `resumed`: the span of the epoch's order an elastic resume left,
        else None) and `order`: what defines the epoch's global order (data set listing,
        num_samples, seed, shuffle, modality, sampler options) with its sha256
        `fingerprint`. JSON-serialisable; see torch_bridge.state."""
        plan = self.plan
        resumed = plan.resumed if plan.resumed is not None and \
            plan.resumed.epoch == self.epoch else None
        return {"version": STATE_VERSION, "epoch": self.epoch,
                "batches_consumed": self._consumed, "num_batches": len(self),
                "seed": plan.seed, "world_size": plan.world_size, "rank": plan.rank,
                "batch_size": plan.batch_size, "drop_last": plan.drop_last,
                "num_samples": plan.num_samples, "order": dict(self._order),
                "fingerprint": self._fingerprint,
                "resumed": None if resumed is None else resumed.to_state()}

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
        diffs = order_differences(saved, self.plan, self._order)
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
        _close_engine(self._engine)

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _close_engine(engine) -> None:
    engine.close()
    source = getattr(getattr(engine, "modality", None), "source", None)
    if callable(getattr(source, "close", None)):
        source.close()


def _listing_digest(modality) -> str | None:
    """sha256 of the ordered sample files, each relative to its data root (so moving the data
    set keeps it), or its base name; None when the modality exposes no file list."""
    import hashlib
    source = getattr(modality, "source", None)
    if hasattr(source, "files"):
        paths = [str(p) for p in source.files]
    elif hasattr(source, "scenes"):
        paths = [str(scene.path) for scene in source.scenes]
    else:
        return None
    roots = [os.path.abspath(r) for r in getattr(source, "roots", ())]
    digest = hashlib.sha256()
    for path in paths:
        full = os.path.abspath(path)
        root = next((r for r in roots if full.startswith(r + os.sep)), None)
        digest.update(os.path.relpath(full, root).encode() if root else
                      os.path.basename(full).encode())
        digest.update(b"\0")
    return f"{len(paths)} files, sha256 {digest.hexdigest()}"


def _order_spec(plan: EpochPlan, modality, name: str) -> dict[str, Any]:
    """What defines the global order of a loader's epochs (JSON-serialisable); the layout
    (world size, batch size, drop_last) is not part of it: a state resumes across those."""
    return {"listing": _listing_digest(modality),
            "num_samples": plan.num_samples, "seed": plan.seed, "shuffle": plan.shuffle,
            "modality": name,
            **(plan.sampler.describe() if plan.sampler is not None else {})}


def _fingerprint(order: dict[str, Any]) -> str:
    return fingerprint(order)


def _resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        found = torch.distributed.get_rank(), torch.distributed.get_world_size()
    else:
        found = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    return (found[0] if rank is None else rank), (found[1] if world_size is None else world_size)


def resolve_device(device: str | torch.device) -> torch.device:
    """A torch.device for 'cpu', 'cuda' or 'cuda:N'; ValueError for anything else."""
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


def _local_gpu() -> int:
    """The GPU a plain "cuda" means: LOCAL_RANK under torchrun (one GPU per process on a
    node), else the current device."""
    local = os.environ.get("LOCAL_RANK")
    if local is None:
        return torch.cuda.current_device()
    count = torch.cuda.device_count()
    if not local.isdigit() or int(local) >= count:
        raise ValueError(f"LOCAL_RANK={local!r} does not name one of this node's {count} "
                         f"GPU(s); pass device='cuda:N' or start fewer processes per node")
    return int(local)


def __getattr__(name: str):
    """`from torch_bridge.loader import make_loader` keeps working (it lives in
    torch_bridge.factory, which imports this module)."""
    if name == "make_loader":
        from torch_bridge.factory import make_loader
        return make_loader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
