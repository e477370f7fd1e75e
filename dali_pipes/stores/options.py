"""The store options every modality takes for data behind URLs."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class StoreOptions:
    """`storage_options` go to fsspec (credentials, endpoint, ...); `cache_dir` keeps read
    blocks on local disk, at most `cache_limit` bytes (None: no bound)."""

    storage_options: dict | None = None
    cache_dir: str | None = None
    cache_limit: int | None = None

    def given(self) -> bool:
        """Whether any option differs from its default (they apply to URLs only)."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def as_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of `FsspecStore`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
