"""Stores: how a source's bytes are read, whatever holds them (local files, objects behind
URLs through fsspec, byte ranges of tar shards in either, or a store the user hands in).

`Store` declares what every store answers: a listing of the objects under a prefix (with
their sizes and versions), a stat, byte-range reads and a file object, plus its
capabilities. A store is a value: `make_loader(..., store=...)` takes any object that
satisfies it, and `data` is then a path in that store's namespace. `resolve_store`
(`dali_pipes.stores.select`) is the one place a store is chosen for `data` when none is
handed in (an `FsspecStore` for URLs, described by `StoreOptions`; a `LocalStore`
otherwise); below it every source takes a `Store`. Sources keep their listings in numpy
arrays and ask a store for bytes by (path, offset, size), so the plan keeps addressing
samples by index on every store. `dali_pipes.testing.store_tests.StoreTests` is the
conformance suite a store passes (tests/stores/test_store_conformance.py runs it over the
built-in stores and over a store written outside the library).
"""
from __future__ import annotations

from typing import IO, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = ["Entry", "Store"]


class Entry(NamedTuple):
    """One object of a listing: its path (in the store's namespace), size and version."""

    path: str
    size: int
    version: int


@runtime_checkable
class Store(Protocol):
    """Bytes by name: a local path, a URL, or a key of the user's own store. Stores pickle
    (DataLoader and feed workers get a copy) and hold no open handle between calls.

    Paths are strings; a folder's objects are the paths that start with the folder's path
    and "/" (`list`). Versions are ints that change when an object's bytes do (the
    modification time of a local file, a digest of a remote object's ETag).
    """

    # Whether `list` works (class folders, folders of shards and scene folders need it; a
    # store without listing still reads shards, scenes and files named one by one).
    supports_listing: bool

    def list(self, prefix: str) -> list[Entry]:
        """Every object under the folder `prefix` (at any depth), sorted by path, each with
        its size and version. ValueError, saying why, for a prefix this store cannot list;
        OSError naming `prefix` when the listing fails."""
        ...

    def stat(self, path: str) -> tuple[int, int]:
        """(size in bytes, version) of `path`. FileNotFoundError (an OSError) naming
        `path` when there is no such object; another OSError naming it when it cannot be
        asked."""
        ...

    def read_range(self, path: str, offset: int, size: int,
                   stat: tuple[int, int] | None = None) -> np.ndarray:
        """Exactly `size` bytes of `path` from `offset`, as a new uint8 array.

        `stat`: the (size, version) a listing or `stat` gave for `path`, when the caller
        has it: the store need not ask again, and a store that can tell raises an OSError
        naming `path` when the object is no longer that version. EOFError naming `path`
        and the range when the object ends before; OSError naming `path` when it cannot
        be read."""
        ...

    def open(self, path: str) -> IO[bytes]:
        """`path` opened for reading, binary (for walking a shard's tar headers once)."""
        ...
