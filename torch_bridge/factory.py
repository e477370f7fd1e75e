"""make_loader(): the modality from the registry, the plan, the engine, the Loader."""
from __future__ import annotations

from typing import Literal

from torch_bridge import registry
from torch_bridge.errors import SampleGuard
from torch_bridge.loader import Loader, _resolve_rank, resolve_device
from torch_bridge.plan import EpochPlan
from torch_bridge.protocols import Engine, Modality


def make_loader(modality: Literal["image", "video", "hyperspectral", "fusion"], data, *,
                backend: Literal["dali", "torch"] = "dali", batch_size: int = 64,
                device: str = "cpu", shuffle: bool = True, seed: int = 0,
                drop_last: bool = False, rank: int | None = None,
                world_size: int | None = None, on_error: Literal["raise", "skip"] = "raise",
                config=None, reference=None,
                sampling: Literal["uniform", "class_balanced", "repeated"] = "uniform",
                min_per_source: int | None = None, repeats: int = 3,
                **modality_options) -> Loader:
    """A drop-in iterable of batch dicts; see CONTRACT.md for every option.

    `sampling="class_balanced"`: each epoch draws as many samples as the data set holds,
    with replacement, every class equally likely. `min_per_source` (with `data` a list of
    folders): every batch on every rank holds at least that many samples of each source.
    Both are deterministic under (seed, epoch) and resume exactly; they repeat samples, so
    a pass no longer yields every index exactly once (see torch_bridge.sampling).
    `sampling="repeated"`: DeiT's repeated augmentation, each shuffled index `repeats` times
    with its own augmentation (torch_bridge.repeated).

    `config` (DALI backend only): a decode preset name ("default", "throughput",
    "low_memory", "exact"), a path to a preset TOML file, or a mapping of preset keys.
    `reference` (torch backend only): a ReferenceOptions or a mapping of its fields.
    Modality options are those `torch_bridge.registry` lists for the modality; any other
    name raises ValueError listing the valid ones.

    Returns:
        A `Loader` over the modality's data on the chosen backend.
    """
    from torch_bridge.sampling import sampler_for

    spec = registry.get(modality)
    _check_backend_options(backend, config, reference)
    dev = resolve_device(device)
    guard = SampleGuard(on_error)
    mod = spec.create(data, seed=seed, device=str(dev), options=modality_options)
    rank, world_size = _resolve_rank(rank, world_size)
    sampler = sampler_for(sampling, min_per_source, source=getattr(mod, "source", None),
                          multi_source=isinstance(data, (list, tuple)),
                          batch_size=batch_size, shuffle=shuffle, repeats=repeats)
    plan = EpochPlan(len(mod), batch_size, seed=seed, shuffle=shuffle, drop_last=drop_last,
                     rank=rank, world_size=world_size, sampler=sampler)
    engine = _engine(backend, mod, plan, dev, guard, config=config, reference=reference)
    return Loader(engine, plan, guard, modality=modality, backend=backend)


def _check_backend_options(backend: str, config, reference) -> None:
    """ValueError for an unknown backend, or an option the chosen backend would ignore."""
    if backend not in ("dali", "torch"):
        raise ValueError(f"backend must be 'dali' or 'torch', got {backend!r}")
    if backend == "torch" and config is not None:
        raise ValueError("config= sets the DALI decode preset; it has no effect with "
                         "backend='torch' (use reference= for the torch path's options)")
    if backend == "dali" and reference is not None:
        raise ValueError("reference= sets the torch path's options; it has no effect with "
                         "backend='dali' (use config= for the DALI decode preset)")


def _engine(backend: str, mod: Modality, plan: EpochPlan, dev, guard: SampleGuard, *,
            config, reference) -> Engine:
    """The DALI or torch engine over `plan`."""
    if backend == "dali":
        from dali_pipes.pipelines.config import load_config
        from torch_bridge.dali_engine import DaliEngine
        return DaliEngine(mod, plan, device=dev, config=load_config(config), guard=guard)
    from torch_bridge.reference import ReferenceOptions, TorchEngine
    opts = reference if isinstance(reference, ReferenceOptions) else \
        ReferenceOptions(**(reference or {}))
    return TorchEngine(mod, plan, device=dev, guard=guard, options=opts)
