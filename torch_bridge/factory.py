"""make_loader(): the modality from the registry, the plan, the engine, the Loader."""
from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from dali_pipes.stores import Store
from torch_bridge import registry
from torch_bridge._option_types import check_group, check_options
from torch_bridge.backends import SHORTHANDS as BACKEND_SHORTHANDS
from torch_bridge.backends import Backend, DaliBackend, TorchBackend, backend_of
from torch_bridge.errors import SampleGuard
from torch_bridge.loader import Loader, _resolve_rank, resolve_device
from torch_bridge.order.options import SHORTHANDS as SAMPLING_SHORTHANDS
from torch_bridge.order.options import Sampling, sampling_of
from torch_bridge.order.plan import EpochPlan
from torch_bridge.protocols import Engine, Modality


def make_loader(modality: str, data: Any, *,
                backend: Literal["dali", "torch"] | DaliBackend | TorchBackend = "dali",
                batch_size: int = 64, device: str | torch.device = "cpu",
                shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                rank: int | None = None, world_size: int | None = None,
                on_error: Literal["raise", "skip"] = "raise",
                sampling: Literal["uniform", "class_balanced", "repeated"] | Sampling
                | Mapping[str, Any] = "uniform",
                store: Store | None = None, fields: Sequence[str] | None = None,
                log_every: int | None = None, **modality_options: Any) -> Loader:
    """A drop-in iterable of batch dicts (`dict[str, torch.Tensor]`) for a training loop.

    Every option is checked when the loader is made: a value of the wrong type
    (`train="False"`, `batch_size=2.0`, `seed=None`) is a TypeError naming the option.
    The batch fields of each modality are listed in docs/schema.md.

    Options that belong together are one value: the engine's options travel with
    `backend`, the sampling options with `sampling`, a modality's with its groups (e.g.
    `mixing=Mixing(mixup=0.2)` for images). Each field of such a value is also a flat
    keyword, its shorthand (`config=`, `reference=`, `repeats=`, `min_per_source=`,
    `order=`, `shard_window=`, `mixup=`: "Shorthands" in docs/api.md); a shorthand given
    beside its value must agree with it.

    Args:
        modality: a registered modality, one of `torch_bridge.registry.names()` (each
            with its options in docs/api.md; "detection": an images folder with a COCO
            file, `annotations=`, see docs/detection.md).
        data: the data set: a folder of class folders (a list of folders: one source
            each, with a "source_id" field in the batch); for "image" also a Hugging
            Face `datasets.Dataset` (see `image_column` / `label_column`).
        backend: "dali" (decoding and augmentation in a DALI graph) or "torch" (the
            plain Dataset / DataLoader path producing the same batches); or
            `DaliBackend(config=...)` / `TorchBackend(num_workers=...)` with the engine's
            options (`torch_bridge.backends`). Shorthands: `config=` (DALI only: a decode
            preset name, "default", "throughput", "low_memory", "exact", a path to a
            preset TOML file, or a mapping of preset keys) and `reference=` (torch only: a
            `ReferenceOptions` or a mapping of its fields: workers, start method,
            prefetch).
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
        sampling: "uniform"; "class_balanced": each epoch draws as many samples as the
            data set holds, with replacement, every class equally likely; "repeated":
            DeiT's repeated augmentation, each shuffled index `repeats` times with its own
            augmentation (torch_bridge.order.repeated); or a `Sampling` (with the
            options below), or a dict of its fields. Shorthands: `repeats=` (copies of
            each index per epoch with sampling="repeated", default 3); `min_per_source=`
            (with `data` a list of
            folders, every batch on every rank holds at least that many samples of each
            source; like class_balanced sampling it is deterministic under (seed, epoch),
            resumes exactly and repeats samples); `order=` ("global": one permutation of
            all samples; "shards": WebDataset shards only, shards shuffled, each rank
            reading its own run of them, samples shuffled within a window of
            `shard_window` shards, see docs/data_sources.md; it resumes exactly, also
            under another batch size, but not mid-epoch under another world size);
            `shard_window=` (shards per shuffle window with order="shards", default 4:
            larger mixes batches better, smaller reads fewer shards at a time).
        store: any object satisfying `dali_pipes.stores.Store` (listing, stat, byte-range
            reads, open): every listing and read of `data` goes through it, and `data` is
            a path (or paths) in its namespace. None: local files, or the built-in fsspec
            store for URLs (described by storage_options, cache_dir and cache_limit).
        fields: batch field names, e.g. ("image", "label"): each batch is then a tuple of
            those fields' tensors, in order (`for images, target in loader`); None: dicts.
        log_every: one line of `loader.stats()` per N batches through `logging` (logger
            "torch_bridge", level INFO); None: no lines.
        **modality_options: the options `torch_bridge.registry` lists for the modality
            (e.g. image: size, train, the recipe options of docs/recipes.md and their
            groups, max_pixels, image_column, label_column, storage_options, cache_dir,
            cache_limit), and the shorthands above; any other name is a ValueError naming
            the likely meant one.

    Returns:
        A `Loader`: iterate it for batches; `len()`, `set_epoch`, `state_dict` /
        `load_state_dict`, `skipped`, `classes`, `class_to_idx`, `path(i)` and `close()`.
    """
    check_options(make_loader, dict(
        modality=modality, backend=backend, batch_size=batch_size, device=device,
        shuffle=shuffle, seed=seed, drop_last=drop_last, rank=rank, world_size=world_size,
        on_error=on_error, sampling=sampling, log_every=log_every))
    # numpy scalars passed the check; the plan and the JSON state want Python ones
    batch_size, seed, shuffle, drop_last = int(batch_size), int(seed), bool(shuffle), \
        bool(drop_last)
    from torch_bridge.order.sampling import sampler_for

    given = {name: modality_options.pop(name) for name in SHORTHANDS if name in modality_options}
    check_group(Sampling, {k: v for k, v in given.items() if k in SAMPLING_SHORTHANDS})
    spec = registry.get(modality)
    chosen = backend_of(backend, config=given.pop("config", None),
                        reference=given.pop("reference", None))
    plan_sampling = sampling_of(sampling, given)
    dev = resolve_device(device)
    guard = SampleGuard(on_error)
    mod = spec.create(data, seed=seed, device=str(dev), options=modality_options,
                      keywords=_KEYWORDS, store=store)
    if len(mod) == 0:  # e.g. an annotations file listing no images
        raise ValueError(f"make_loader({modality!r}): {_describe(data, modality_options)} "
                         f"holds no samples")
    rank, world_size = _resolve_rank(rank, world_size, samples=len(mod))
    sampler = sampler_for(plan_sampling, source=mod.source,
                          multi_source=isinstance(data, (list, tuple)),
                          batch_size=batch_size, shuffle=shuffle)
    plan = EpochPlan(len(mod), batch_size, seed=seed, shuffle=shuffle, drop_last=drop_last,
                     rank=rank, world_size=world_size, sampler=sampler)
    return Loader(_engine(chosen, mod, plan, dev, guard), plan, guard, modality=mod,
                  device=dev, backend=chosen.name, log_every=log_every, fields=fields)


def _engine(backend: Backend, mod: Modality, plan: EpochPlan, dev: torch.device,
            guard: SampleGuard) -> Engine:
    """The DALI or torch engine over `plan`."""
    if isinstance(backend, DaliBackend):
        from dali_pipes.pipelines.config import load_config
        from torch_bridge.engines.dali import DaliEngine
        return DaliEngine(mod, plan, device=dev, config=load_config(backend.config),
                          guard=guard)
    from torch_bridge.engines.reference import TorchEngine
    return TorchEngine(mod, plan, device=dev, guard=guard, options=backend)


# make_loader's shorthands: flat keywords of its `backend` and `sampling` values
SHORTHANDS = (*BACKEND_SHORTHANDS, *SAMPLING_SHORTHANDS)
# make_loader's own keywords and shorthands, suggested when a modality option is misspelt
# ("batchsize")
_KEYWORDS = tuple(name for name in inspect.signature(make_loader).parameters
                  if name not in ("modality", "data", "modality_options")) + SHORTHANDS


def _describe(data: Any, options: Mapping[str, Any]) -> str:
    """The data (and annotations file, where one is given) named in errors."""
    named = f"data={data!r}" if isinstance(data, (str, os.PathLike, list, tuple)) \
        else f"data ({type(data).__name__})"
    if options.get("annotations") is not None:
        named += f" with annotations={options['annotations']!r}"
    return named
