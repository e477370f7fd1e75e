"""The one place a store is chosen for a modality's `data`: the store the user handed in, an
`FsspecStore` described by `StoreOptions` for URLs, or a `LocalStore` for local files."""
from __future__ import annotations

import inspect
import os

from dali_pipes.stores import Store
from dali_pipes.stores.local import LocalStore
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.remote import FsspecStore, is_url


def data_paths(data) -> list[str] | None:
    """The paths `data` names (a path, a URL or a list or tuple of them); None for data of
    another kind (a `datasets.Dataset`, ...)."""
    items = [data] if isinstance(data, (str, os.PathLike)) else \
        list(data) if isinstance(data, (list, tuple)) else None
    if items is None or not all(isinstance(i, (str, os.PathLike)) for i in items):
        return None
    return [os.fspath(i) for i in items]


def names_urls(data) -> bool:
    """Whether `data` (a path, a URL or a list of them) names any URL."""
    return any(is_url(p) for p in data_paths(data) or ())


def resolve_store(data, store: Store | None = None, options: StoreOptions | None = None
                  ) -> Store:
    """The store that lists and reads `data`.

    Args:
        data: what make_loader was given (paths, URLs, or a list of them).
        store: a store the user handed in (any object satisfying `Store`): `data` is
            then a path (or paths) in its namespace. None: chosen from `data`.
        options: storage_options, cache_dir and cache_limit, which describe the built-in
            store of URLs.

    Returns:
        `store` when given (behind `StatFree` when its `read_range` takes no `stat`); an
        FsspecStore with `options` when `data` names URLs; else a LocalStore. TypeError
        for a `store` without the Store methods; ValueError for options that would be
        ignored (options beside a store handed in, or for local data).
    """
    options = options or StoreOptions()
    if store is not None:
        missing = missing_members(store)
        if missing:
            raise TypeError(f"store must satisfy dali_pipes.stores.Store (list, stat, "
                            f"read_range, open); {type(store).__name__} lacks "
                            f"{', '.join(missing)}")
        if options.given():
            raise ValueError("storage_options, cache_dir and cache_limit describe the "
                             "built-in stores; with store= give them to your store")
        if data_paths(data) is None:
            raise ValueError(f"store= reads data named by paths in the store; data is a "
                             f"{type(data).__name__}")
        return store if _takes_stat(store) else StatFree(store)
    if names_urls(data):
        paths = data_paths(data) or []
        if not all(is_url(p) for p in paths):
            raise ValueError(f"data: a list of URLs or of local folders, not both: {paths}")
        return FsspecStore(**options.as_kwargs())
    if options.given():
        raise ValueError(f"storage_options, cache_dir and cache_limit apply to URLs only; "
                         f"data names local files: {data!r}")
    return LocalStore()


def open_store(data, options: StoreOptions | None = None) -> Store:
    """The built-in store for `data` (an FsspecStore for URLs, else a LocalStore)."""
    return resolve_store(data, None, options)


def store_paths(data, store: Store) -> list[str]:
    """The paths `data` names in `store`'s namespace, when `store` is listed and read
    through its own methods; [] for the built-in local store (walked directly)."""
    return [] if local_files(store) else data_paths(data) or []


def local_files(store: Store) -> bool:
    """Whether the paths of `store` are local files that may be walked, opened and memory
    mapped directly: the built-in LocalStore only. Any other store, one that wraps or
    subclasses LocalStore included, is listed and read through its own methods."""
    return type(store) is LocalStore


def can_list(store: Store) -> bool:
    """The store's `supports_listing` (a store that does not say lists when it has `list`)."""
    return bool(getattr(store, "supports_listing", True))


def missing_members(store: object) -> list[str]:
    """The methods of `Store` that `store` lacks (`supports_listing` may be left out)."""
    return [name for name in ("list", "stat", "read_range", "open")
            if not callable(getattr(store, name, None))]


def _takes_stat(store: object) -> bool:
    """Whether `store.read_range` takes a 4th positional argument (the listed stat)."""
    try:
        params = inspect.signature(store.read_range).parameters.values()  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # no signature to read (a builtin): assume it does
        return True
    kinds = [p.kind for p in params]
    return inspect.Parameter.VAR_POSITIONAL in kinds or sum(
        k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for k in kinds) >= 4


class StatFree:
    """A user's store whose `read_range(path, offset, size)` takes no `stat`: the same
    store, called without it (it cannot refuse an object changed since its listing)."""

    def __init__(self, store):
        self.store = store
        self.supports_listing = can_list(store)

    def list(self, prefix: str):
        return self.store.list(prefix)

    def stat(self, path: str):
        return self.store.stat(path)

    def read_range(self, path: str, offset: int, size: int, stat=None):
        return self.store.read_range(path, offset, size)

    def open(self, path: str):
        return self.store.open(path)
