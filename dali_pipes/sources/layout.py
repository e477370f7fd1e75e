"""What `data` names in its store: tar shards, or folders of class folders (with their
listing, for a store listed through its own methods).

Local files are told apart on the file system (`is_shard_data`). In any other store (URLs,
a store handed in) a `.tar` path or brace pattern names shards; a folder is listed once and
holds shards when `.tar` objects lie directly in it (a web server's folder: when its page
links `.tar` files), else class folders, whose listing the folder sources take as it is.
"""
from __future__ import annotations

from dataclasses import dataclass

from dali_pipes.sources.remote_folders import Objects
from dali_pipes.sources.shard_names import (
    GZIP_SUFFIXES,
    folder_shards,
    is_shard_data,
    names_shard_files,
)
from dali_pipes.stores import Store
from dali_pipes.stores.select import can_list, store_paths


@dataclass(frozen=True)
class Layout:
    """`shards`: `data` names tar shards. `objects`: for folders in a store listed through
    its methods, every object under each root (None otherwise, and for folders that store
    cannot list: a source that needs their listing asks, and raises the store's error)."""

    shards: bool
    objects: list[Objects] | None = None


def data_layout(data, store: Store) -> Layout:
    """The layout of `data` in `store` (see the module doc).

    Returns:
        The Layout; the store's OSError when a listing fails.
    """
    paths = store_paths(data, store)
    if not paths:
        return Layout(is_shard_data(data))
    if any(names_shard_files(p) for p in paths):
        return Layout(True)
    if any(p.startswith(("http://", "https://")) for p in paths) and \
            any(_linked_shards(p, store) for p in paths):
        return Layout(True)
    if not can_list(store):
        return Layout(False)
    try:
        listed = [[tuple(e) for e in store.list(p)] for p in paths]
    except ValueError:  # a folder this store cannot list (http(s)): not listed here
        return Layout(False)
    if any(folder_shards(p, store, found) or _only_gzip(p, found)
           for p, found in zip(paths, listed, strict=True)):
        return Layout(True)
    return Layout(False, listed)  # type: ignore[arg-type]


def _only_gzip(folder: str, listed) -> bool:
    """Whether the visible objects of `folder` are all gzip-compressed shards directly in
    it (the shard sources refuse them by name; an images folder that also holds a
    downloaded archive stays an images folder)."""
    prefix = folder.rstrip("/") + "/"
    names = [p[len(prefix):] for p, _, _ in listed if p.startswith(prefix)]
    visible = [n for n in names if not any(part.startswith(".") for part in n.split("/"))]
    return bool(visible) and all("/" not in n and n.lower().endswith(GZIP_SUFFIXES)
                                 for n in visible)


def _linked_shards(url: str, store: Store) -> bool:
    try:
        return bool(folder_shards(url, store))
    except OSError:  # no page to read links from: not shards
        return False
