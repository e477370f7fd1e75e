"""make_loader(): the modality from the registry, the plan, the engine, the Loader."""
from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from dali_pipes.stores import Store
from torch_bridge import registry
from torch_bridge._option_types import check_options
from torch_bridge.errors import SampleGuard
from torch_bridge.loader import Loader, _resolve_rank, resolve_device
from torch_bridge.order.plan import EpochPlan
from torch_bridge.protocols import Engine, Modality

if TYPE_CHECKING:
    from torch_bridge.engines.reference import ReferenceOptions


def make_loader(modality: str, data: Any, *,
                backend: Literal["dali", "torch"] = "dali", batch_size: int = 64,
                device: str | torch.device = "cpu", shuffle: bool = True, seed: int = 0,
                drop_last: bool = False, rank: int | None = None,
                world_size: int | None = None, on_error: Literal["raise", "skip"] = "raise",
                config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
                reference: ReferenceOptions | Mapping[str, Any] | None = None,
                sampling: Literal["uniform", "class_balanced", "repeated"] = "uniform",
                min_per_source: int | None = None, repeats: int = 3,
                order: Literal["global", "shards"] = "global",
                shard_window: int | None = None, log_every: int | None = None,
                fields: Sequence[str] | None = None, store: Store | None = None,
                **modality_options: Any) -> Loader:
    """A drop-in iterable of batch dicts (`dict[str, torch.Tensor]`) for a training loop.

    Every option is checked when the loader is made: a value of the wrong type
    (`train="False"`, `batch_size=2.0`, `seed=None`) is a TypeError naming the option.
    The batch fields of each modality are listed in docs/schema.md.

    Args:
        modality: a registered modality, one of `torch_bridge.registry.names()` (each
            with its options in docs/api.md; "detection": an images folder with a COCO
            file, `annotations=`, see docs/detection.md).
        data: the data set: a folder of class folders (a list of folders: one source
            each, with a "source_id" field in the batch); for "image" also a Hugging
            Face `datasets.Dataset` (see `image_column` / `label_column`).
        backend: "dali" (decoding and augmentation in a DALI graph) or "torch" (the
            plain Dataset / DataLoader path producing the same batches).
        batch_size: samples per batch on each rank.
        device: "cpu", "cuda" (this process's GPU) or "cuda:N"; where batches land.
        shuffle: a new order every epoch (a pure function of seed and epoch).
        seed: the seed of the order and of every augmentation parameter.
        drop_last: leave out the last, partial batch of an epoch.
        rank: this process's rank (default: torch.distributed, else $RANK, else 0).
        world_size: the number of ranks (default: torch.distributed, else $WORLD_SIZE,
            else 1); every rank gets the same number of batches.
        on_error: "raise" (stop at a bad sample, naming the file and index) or "skip"
            (leave it out, count it in `loader.skipped`).
        config: DALI backend only: a decode preset name ("default", "throughput",
            "low_memory", "exact"), a path to a preset TOML file, or a mapping of preset
            keys.
        reference: torch backend only: a `ReferenceOptions` or a mapping of its fields
            (workers, start method, prefetch).
        sampling: "uniform"; "class_balanced": each epoch draws as many samples as the
            data set holds, with replacement, every class equally likely; "repeated":
            DeiT's repeated augmentation, each shuffled index `repeats` times with its own
            augmentation (torch_bridge.order.repeated).
        min_per_source: with `data` a list of folders, every batch on every rank holds at
            least that many samples of each source. Like class_balanced sampling it is
            deterministic under (seed, epoch), resumes exactly and repeats samples.
        repeats: copies of each index per epoch with sampling="repeated" (default 3).
        order: "global" (one permutation of all samples) or "shards" (WebDataset shards
            only: shards shuffled, each rank reading its own run of them, samples
            shuffled within a window of `shard_window` shards; see docs/data_sources.md).
            It resumes exactly, also under another batch size, but not mid-epoch under
            another world size.
        shard_window: shards per shuffle window with order="shards" (default 4): larger
            mixes batches better, smaller reads fewer shards at a time.
        log_every: one line of `loader.stats()` per N batches through `logging` (logger
            "torch_bridge", level INFO); None: no lines.
        fields: batch field names, e.g. ("image", "label"): each batch is then a tuple of
            those fields' tensors, in order (`for images, target in loader`); None: dicts.
        store: any object satisfying `dali_pipes.stores.Store` (listing, stat, byte-range
            reads, open): every listing and read of `data` goes through it, and `data` is
            a path (or paths) in its namespace. None: local files, or the built-in fsspec
            store for URLs (described by storage_options, cache_dir and cache_limit).
        **modality_options: the options `torch_bridge.registry` lists for the modality
            (e.g. image: size, train, the recipe options of docs/recipes.md, max_pixels,
            image_column, label_column, storage_options, cache_dir, cache_limit); any
            other name is a ValueError listing the valid ones.

    Returns:
        A `Loader`: iterate it for batches; `len()`, `set_epoch`, `state_dict` /
        `load_state_dict`, `skipped`, `classes`, `class_to_idx`, `path(i)` and `close()`.
    """
    check_options(make_loader, dict(
        modality=modality, backend=backend, batch_size=batch_size, device=device,
        shuffle=shuffle, seed=seed, drop_last=drop_last, rank=rank, world_size=world_size,
        on_error=on_error, sampling=sampling, min_per_source=min_per_source,
        repeats=repeats, order=order, shard_window=shard_window, log_every=log_every))
    # numpy scalars passed the check; the plan and the JSON state want Python ones
    batch_size, seed, shuffle, drop_last = int(batch_size), int(seed), bool(shuffle), \
        bool(drop_last)
    from torch_bridge.order.sampling import sampler_for

    spec = registry.get(modality)
    _check_backend_options(backend, config, reference)
    dev = resolve_device(device)
    guard = SampleGuard(on_error)
    mod = spec.create(data, seed=seed, device=str(dev), options=modality_options,
                      keywords=_KEYWORDS, store=store)
    if len(mod) == 0:  # e.g. an annotations file listing no images
        raise ValueError(f"make_loader({modality!r}): {_describe(data, modality_options)} "
                         f"holds no samples")
    rank, world_size = _resolve_rank(rank, world_size, samples=len(mod))
    sampler = sampler_for(sampling, min_per_source, source=mod.source,
                          multi_source=isinstance(data, (list, tuple)),
                          batch_size=batch_size, shuffle=shuffle, repeats=repeats,
                          order=order, shard_window=shard_window)
    plan = EpochPlan(len(mod), batch_size, seed=seed, shuffle=shuffle, drop_last=drop_last,
                     rank=rank, world_size=world_size, sampler=sampler)
    engine = _engine(backend, mod, plan, dev, guard, config=config, reference=reference)
    return Loader(engine, plan, guard, modality=mod, device=dev, backend=backend,
                  log_every=log_every, fields=fields)


def _check_backend_options(backend: str, config: object, reference: object) -> None:
    """ValueError for an unknown backend, or an option the chosen backend would ignore."""
    if backend not in ("dali", "torch"):
        raise ValueError(f"backend must be 'dali' or 'torch', got {backend!r}")
    if backend == "torch" and config is not None:
        raise ValueError("config= sets the DALI decode preset; it has no effect with "
                         "backend='torch' (use reference= for the torch path's options)")
    if backend == "dali" and reference is not None:
        raise ValueError("reference= sets the torch path's options; it has no effect with "
                         "backend='dali' (use config= for the DALI decode preset)")


def _engine(backend: str, mod: Modality, plan: EpochPlan, dev: torch.device,
            guard: SampleGuard, *, config: Any, reference: Any) -> Engine:
    """The DALI or torch engine over `plan`."""
    if backend == "dali":
        from dali_pipes.pipelines.config import load_config
        from torch_bridge.engines.dali import DaliEngine
        return DaliEngine(mod, plan, device=dev, config=load_config(config), guard=guard)
    from torch_bridge.engines.reference import ReferenceOptions, TorchEngine
    opts = reference if isinstance(reference, ReferenceOptions) else \
        ReferenceOptions(**(reference or {}))
    return TorchEngine(mod, plan, device=dev, guard=guard, options=opts)


# make_loader's own keywords, suggested when a modality option is misspelt ("batchsize")
_KEYWORDS = tuple(name for name in inspect.signature(make_loader).parameters
                  if name not in ("modality", "data", "modality_options"))


def _describe(data: Any, options: Mapping[str, Any]) -> str:
    """The data (and annotations file, where one is given) named in errors."""
    named = f"data={data!r}" if isinstance(data, (str, os.PathLike, list, tuple)) \
        else f"data ({type(data).__name__})"
    if options.get("annotations") is not None:
        named += f" with annotations={options['annotations']!r}"
    return named
