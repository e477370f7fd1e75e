"""The one place a store is chosen for a modality's `data` and its store options."""
from __future__ import annotations

import os

from dali_pipes.stores import Store
from dali_pipes.stores.local import LocalStore
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.remote import FsspecStore, is_url


def names_urls(data) -> bool:
    """Whether `data` (a path, a URL or a list of them) names any URL."""
    items = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    return any(isinstance(i, (str, os.PathLike)) and is_url(os.fspath(i)) for i in items)


def remote_store(data, options: StoreOptions | None = None) -> FsspecStore | None:
    """An FsspecStore with `options` when `data` names URLs, else None.

    Args:
        data: what make_loader was given (paths, URLs, or a list of them).
        options: storage_options, cache_dir and cache_limit.

    Returns:
        The store, or None for local data; ValueError when options are given for local
        data (they would be ignored).
    """
    options = options or StoreOptions()
    if names_urls(data):
        return FsspecStore(**options.as_kwargs())
    if options.given():
        raise ValueError(f"storage_options, cache_dir and cache_limit apply to URLs only; "
                         f"data names local files: {data!r}")
    return None


def open_store(data, options: StoreOptions | None = None) -> Store:
    """`remote_store`'s store for URLs, a LocalStore for local data."""
    return remote_store(data, options) or LocalStore()
