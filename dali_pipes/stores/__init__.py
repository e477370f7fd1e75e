"""Stores: how a source's bytes are read, whatever holds them (local files, objects behind
URLs through fsspec, byte ranges of tar shards in either).

`Store` declares what every store answers; `open_store` / `remote_store` are the one place
a store is chosen for a modality's `data` and its `StoreOptions`. Sources keep their
listings in numpy arrays and ask a store for bytes by (object, offset, size), so the plan
keeps addressing samples by index on every store. `dali_pipes.testing.store_tests` holds
the conformance suite each store passes (tests/stores/test_store_conformance.py).
"""
from __future__ import annotations

from typing import IO, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Store(Protocol):
    """Bytes by name: a local path or a URL. Stores pickle (DataLoader and feed workers get
    a copy) and hold no open handle between calls."""

    def stat(self, path: str) -> tuple[int, int]:
        """(size in bytes, version): the version is a number that changes when the object
        does (the modification time of a local file; the ETag, else Last-Modified, of a
        remote object). OSError naming `path` when there is no such object."""
        ...

    def read_range(self, path: str, offset: int, size: int) -> np.ndarray:
        """Exactly `size` bytes of `path` from `offset`, as a new uint8 array. EOFError
        naming `path` and the range when the object ends before; OSError naming `path`
        when it cannot be read."""
        ...

    def open(self, path: str) -> IO[bytes]:
        """`path` opened for reading, binary (for walking a shard's tar headers once)."""
        ...
