"""The store options every modality takes for data behind URLs, checked once."""
from __future__ import annotations

from dali_pipes.sources.image import remote_roots
from dali_pipes.stores.remote import FsspecStore


def remote_store(data, *, storage_options: dict | None, cache_dir: str | None,
                 cache_limit: int | None) -> FsspecStore | None:
    """An FsspecStore with these options when `data` names URLs, else None (ValueError when
    any of them is set for local data: it would be ignored)."""
    if remote_roots(data):
        return FsspecStore(storage_options=storage_options, cache_dir=cache_dir,
                           cache_limit=cache_limit)
    if any(v is not None for v in (storage_options, cache_dir, cache_limit)):
        raise ValueError("storage_options, cache_dir and cache_limit apply to URLs only; "
                         f"data names local files: {data!r}")
    return None
