"""The Loader every backend hands to a training loop, and make_loader() that builds it."""
from __future__ import annotations

import os
import weakref
from typing import Any, Iterator, Literal

import torch

from torch_bridge.errors import SampleGuard, Skipped
from torch_bridge.plan import EpochPlan

STATE_VERSION = 1


class Loader:
    """Iterates an EpochPlan through an engine (DALI or torch) and keeps the pass state.

    `len()` is the batches per epoch on this rank. A full pass advances the epoch by one;
    `set_epoch(e)` chooses the epoch of the next pass. `state_dict()` records the epoch and
    the batches yielded in it, and a loader given that state continues exactly there.
    With world_size > 1 every pass yields `len()` batches: one whose every sample was
    skipped comes empty (batch dimension 0); see `__iter__`, also for a second `iter()`.
    """

    def __init__(self, engine, plan: EpochPlan, guard: SampleGuard, *, modality: str,
                 backend: str):
        self._engine, self.plan, self._guard = engine, plan, guard
        self.modality, self.backend = modality, backend
        self.epoch = 0
        self._consumed = 0  # plan batches consumed in the current pass
        self._resume_from = 0  # where the next pass starts (non-zero after load_state_dict)
        self._live_pass: _Pass | None = None  # the pass of the last iter() (see __iter__)
        self._template: dict | None = None  # field -> (dtype, shape[1:], device) for empties
        # The listing is fixed at construction: hash it once, not on every state_dict().
        self._order = _order_spec(plan, getattr(engine, "modality", None), modality)
        self._fingerprint = _fingerprint(self._order)
        # A loader dropped without close() still stops its workers / pipeline (also at exit).
        self._finalizer = weakref.finalize(self, _close_engine, engine)

    def __len__(self) -> int:
        return len(self.plan)

    @property
    def skipped(self) -> list[Skipped]:
        """Every sample left out under on_error="skip", with its file, epoch and reason."""
        return list(self._guard.skipped)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch of the next pass. Setting the epoch a loaded state is in keeps
        its position, so a resumed loop may call set_epoch as usual."""
        if epoch != self.epoch:
            self.epoch, self._resume_from = int(epoch), 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """One pass: the batches of the current epoch from the current position.

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

    def _run(self, token: "_Pass") -> Iterator[dict[str, torch.Tensor]]:
        for position, batch in self._engine.iterate(token.epoch, token.start):
            self._consumed = position + 1
            if batch is not None:
                self._template = {k: (v.dtype, v.shape[1:], v.device) for k, v in batch.items()}
                yield batch
            elif self.plan.world_size > 1:
                yield self._empty_batch()
            if self._live_pass is not token:
                raise RuntimeError(
                    f"this iterator over the loader was superseded: iter(loader) was called "
                    f"again while it was live, which restarted epoch {token.epoch}; use one "
                    f"iterator per pass")
        self.epoch, self._consumed = token.epoch + 1, 0

    def _empty_batch(self) -> dict[str, torch.Tensor]:
        """Every field of this loader's batches with batch dimension 0: shapes from the
        last real batch, else from the modality's schema (other dimensions 0)."""
        if self._template is None:
            self._template = _schema_template(self.modality, self._engine)
        return {name: torch.empty((0, *shape), dtype=dtype, device=device)
                for name, (dtype, shape, device) in self._template.items()}

    def state_dict(self) -> dict[str, Any]:
        """Position (epoch, batches consumed) plus what defines the order: `order` (data set
        listing, seed, shuffle, drop_last, world size, batch size, modality) and its sha256
        `fingerprint`, which load_state_dict checks."""
        return {"version": STATE_VERSION, "epoch": self.epoch,
                "batches_consumed": self._consumed, "num_batches": len(self.plan),
                "seed": self.plan.seed, "world_size": self.plan.world_size,
                "rank": self.plan.rank, "num_samples": self.plan.num_samples,
                "order": dict(self._order), "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where `state` stopped; ValueError naming every field that differs when
        the state was saved by a loader with another order (a state without a fingerprint,
        from an older version, is checked on its per-key fields only)."""
        mine = {"num_samples": self.plan.num_samples, "seed": self.plan.seed,
                "world_size": self.plan.world_size, "num_batches": len(self.plan)}
        theirs = dict(state)
        changed = "fingerprint" in state and state["fingerprint"] != self._fingerprint
        if changed:
            mine.update(self._order)
            theirs.update(state.get("order") or {})
        keys = list(mine) + ([k for k in state.get("order") or {} if k not in mine]
                             if changed else [])  # options only the state has (sampling)
        diffs = [f"{key} is {theirs.get(key)!r} in the state but {mine.get(key)!r} in this "
                 f"loader" for key in keys if theirs.get(key) != mine.get(key)]
        if changed:
            diffs.append("the order fingerprint differs")
        if diffs:
            raise ValueError("load_state_dict: the state does not match this loader ("
                             + "; ".join(diffs) + "); resuming would reorder data")
        self.epoch = int(state["epoch"])
        self._resume_from = self._consumed = int(state["batches_consumed"])

    def close(self) -> None:
        """Stop worker processes, release the pipeline and close the files the source keeps
        open (hyperspectral memory maps) now; a later pass reopens them. A loader that is
        garbage collected (or alive at exit) is closed the same way."""
        _close_engine(self._engine)

    def __enter__(self) -> "Loader":
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


def _schema_template(name: str, engine) -> dict:
    """field -> (dtype, shape[1:], device) from the batch schema of modality `name`
    (every non-batch dimension 0); just "index" for a modality without a schema."""
    from dali_pipes.schema import SCHEMAS, SOURCE_ID
    device = getattr(engine, "device", torch.device("cpu"))
    schema = dict(SCHEMAS.get(name, {"index": ("int64", "B")}))
    if getattr(getattr(engine, "modality", None), "multi_source", False):
        schema.update(SOURCE_ID)
    return {field: (getattr(torch, dtype), (0,) * (len(layout) - 1), device)
            for field, (dtype, layout) in schema.items()}


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
    """What defines the order of a loader's passes (JSON-serialisable)."""
    return {"listing": _listing_digest(modality),
            "num_samples": plan.num_samples, "seed": plan.seed, "shuffle": plan.shuffle,
            "drop_last": plan.drop_last, "world_size": plan.world_size,
            "batch_size": plan.batch_size, "modality": name,
            **(plan.sampler.describe() if plan.sampler is not None else {})}


def _fingerprint(order: dict[str, Any]) -> str:
    import hashlib
    import json
    return hashlib.sha256(json.dumps(order, sort_keys=True).encode()).hexdigest()


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


def _modality(name: str, data, seed: int, options: dict, device: torch.device):
    if name == "image":
        from torch_bridge.modalities.image import ImageModality
        return ImageModality(data, seed=seed, **options)
    if name == "hyperspectral":
        from torch_bridge.modalities.hyperspectral import HyperspectralModality
        return HyperspectralModality(data, seed=seed, device=str(device), **options)
    if name == "video":
        from dali_pipes.sources.video_frames import is_frame_folder_tree
        if is_frame_folder_tree(data):  # extracted by `python -m dali_pipes.frames extract`
            from torch_bridge.modalities.video_frames import FrameFolderModality
            return FrameFolderModality(data, seed=seed, **options)
        from torch_bridge.modalities.video import VideoModality
        return VideoModality(data, seed=seed, **options)
    if name == "fusion":
        from torch_bridge.modalities.fusion import FusionModality
        return FusionModality(data, seed=seed, **options)
    raise ValueError(f"unknown modality {name!r}; expected image, video, hyperspectral "
                     f"or fusion")


def make_loader(modality: Literal["image", "video", "hyperspectral", "fusion"], data, *,
                backend: Literal["dali", "torch"] = "dali", batch_size: int = 64,
                device: str = "cpu", shuffle: bool = True, seed: int = 0,
                drop_last: bool = False, rank: int | None = None,
                world_size: int | None = None, on_error: Literal["raise", "skip"] = "raise",
                config=None, reference=None,
                sampling: Literal["uniform", "class_balanced"] = "uniform",
                min_per_source: int | None = None, **modality_options) -> Loader:
    """A drop-in iterable of batch dicts; see CONTRACT.md for every option.

    `sampling="class_balanced"`: each epoch draws as many samples as the data set holds,
    with replacement, every class equally likely. `min_per_source` (with `data` a list of
    folders): every batch on every rank holds at least that many samples of each source.
    Both are deterministic under (seed, epoch) and resume exactly; they repeat samples, so
    a pass no longer yields every index exactly once (see torch_bridge.sampling).

    `config` (DALI backend): a decode preset name ("default", "throughput", "low_memory",
    "exact"), a path to a preset TOML file, or a mapping of preset keys.
    `reference` (torch backend): a ReferenceOptions or a mapping of its fields.
    """
    from torch_bridge.reference import ReferenceOptions
    from torch_bridge.sampling import sampler_for

    dev = resolve_device(device)
    guard = SampleGuard(on_error)
    mod = _modality(modality, data, seed, modality_options, dev)
    rank, world_size = _resolve_rank(rank, world_size)
    sampler = sampler_for(sampling, min_per_source, source=getattr(mod, "source", None),
                          multi_source=isinstance(data, (list, tuple)),
                          batch_size=batch_size, shuffle=shuffle)
    plan = EpochPlan(len(mod), batch_size, seed=seed, shuffle=shuffle, drop_last=drop_last,
                     rank=rank, world_size=world_size, sampler=sampler)
    if backend == "dali":
        from dali_pipes.pipelines.config import load_config
        from torch_bridge.dali_engine import DaliEngine
        engine = DaliEngine(mod, plan, device=dev, config=load_config(config), guard=guard)
    elif backend == "torch":
        from torch_bridge.reference import TorchEngine
        opts = reference if isinstance(reference, ReferenceOptions) else \
            ReferenceOptions(**(reference or {}))
        engine = TorchEngine(mod, plan, device=dev, guard=guard, options=opts)
    else:
        raise ValueError(f"backend must be 'dali' or 'torch', got {backend!r}")
    return Loader(engine, plan, guard, modality=modality, backend=backend)
