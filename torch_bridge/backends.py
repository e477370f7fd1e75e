"""The two engines as values: make_loader's `backend` is "dali" or "torch", or a
`DaliBackend` / `TorchBackend` carrying that engine's options, so an option of one engine
cannot be given to the other.

make_loader's `config=` and `reference=` are shorthands: `backend="dali", config=C` is
`backend=DaliBackend(config=C)`, `backend="torch", reference={"num_workers": 0}` is
`backend=TorchBackend(num_workers=0)`. Given beside a backend value, they must agree with it.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from dali_pipes.option_groups import group_values, same
from dali_pipes.pipelines.config import PipelineConfig
from torch_bridge.engines.reference import ReferenceOptions


@dataclass(frozen=True)
class DaliBackend:
    """backend="dali" (decoding and augmentation in a DALI graph) with its decode preset
    `config`: a preset name ("default", "throughput", "low_memory", "exact"), a path to a
    preset TOML file, a mapping of preset keys or a `PipelineConfig` (None: "default")."""

    config: str | os.PathLike[str] | Mapping[str, Any] | PipelineConfig | None = None
    name: ClassVar[str] = "dali"


@dataclass(frozen=True)
class TorchBackend(ReferenceOptions):
    """backend="torch" (the plain Dataset / DataLoader path) with its DataLoader options:
    the fields of `ReferenceOptions`."""

    name: ClassVar[str] = "torch"


BackendName = Literal["dali", "torch"]
Backend = DaliBackend | TorchBackend
SHORTHANDS = ("config", "reference")


def backend_of(backend: BackendName | Backend, *, config: Any = None, reference: Any = None,
               where: str = "make_loader") -> Backend:
    """The backend value of make_loader's `backend` and its shorthands.

    Args:
        backend: "dali", "torch" or a backend value.
        config: the DALI decode preset (None: not given).
        reference: a `ReferenceOptions` or a mapping of its fields (None: not given).
        where: what error messages name.

    Returns:
        A `DaliBackend` or a `TorchBackend`; ValueError for an unknown backend, a shorthand
        of the other backend, or one that disagrees with the backend value given.
    """
    name = backend.name if isinstance(backend, (DaliBackend, TorchBackend)) else backend
    if name not in ("dali", "torch"):
        raise ValueError(f"backend must be 'dali' or 'torch', got {backend!r}")
    if name == "torch" and config is not None:
        raise ValueError("config= sets the DALI decode preset; it has no effect with "
                         "backend='torch' (use reference= for the torch path's options)")
    if name == "dali" and reference is not None:
        raise ValueError("reference= sets the torch path's options; it has no effect with "
                         "backend='dali' (use config= for the DALI decode preset)")
    if name == "dali":
        if not isinstance(backend, DaliBackend):
            return DaliBackend(config=config)
        if config is not None and not same(config, backend.config):
            raise _disagree(where, f"config={config!r}", backend, "config")
        return backend
    given = {} if reference is None else group_values(ReferenceOptions, reference,
                                                      where=f"{where}: reference")
    if not isinstance(backend, TorchBackend):
        return TorchBackend(**given)
    for key, value in given.items():
        if not same(value, getattr(backend, key)):
            raise _disagree(where, f"reference={reference!r}", backend, key)
    return backend


def _disagree(where: str, shorthand: str, backend: Backend, field: str) -> ValueError:
    return ValueError(f"{where}: {shorthand} and backend={backend!r} disagree "
                      f"(backend.{field} is {getattr(backend, field)!r}); give one of them")
