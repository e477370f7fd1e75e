"""Byte ranges of objects whose size and version a listing (or one stat) already gave.

`FsspecStore.read_range` asks the object's size once per URL and process; `read_object`
reads whole objects. Readers of large objects that need many small ranges of each (cube
windows, members of shards) know size and version from the listing, so they read through
`read_listed_range`: the store's retries, timeouts and block cache, no stat, and a range
that comes back shorter than asked is an EOFError naming the object and the range (the
object changed since it was listed) instead of a silently short array.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.stores.remote import FsspecStore


def read_listed_range(store: FsspecStore, url: str, size: int, version: int, offset: int,
                      count: int) -> np.ndarray:
    """Bytes `offset..offset + count` (uint8) of `url`, listed with `size` bytes at `version`.

    Args:
        store: the store (its block cache, when it has one, serves and keeps the blocks).
        url: the object.
        size, version: from the listing.
        offset, count: the range.

    Returns:
        A uint8 array of `count` bytes; EOFError when the range passes the listed size or
        the server returns fewer bytes; StoreError (an OSError) when the store fails.
    """
    if offset < 0 or count < 0 or offset + count > size:
        raise EOFError(f"{url}: bytes {offset}..{offset + count} requested, the object was "
                       f"listed with {size}")

    def fetch(start: int, end: int) -> bytes:
        data = store._fetch(url, start, end)
        if len(data) != end - start:
            raise EOFError(f"{url}: bytes {start}..{end} requested, got {len(data)} (the "
                           f"object changed since it was listed with {size} bytes)")
        return data

    if count == 0:
        return np.zeros(0, np.uint8)
    if store.cache is not None:
        return store.cache.read(url, version, size, offset, count, fetch)
    return np.frombuffer(fetch(offset, offset + count), np.uint8).copy()


@dataclass(frozen=True)
class ListedObject:
    """A callable `(offset, count) -> uint8 array` over one listed object (pickles with its
    store, so readers holding it go to DataLoader workers)."""

    store: FsspecStore
    url: str
    size: int
    version: int

    def __call__(self, offset: int, count: int) -> np.ndarray:
        return read_listed_range(self.store, self.url, self.size, self.version, offset, count)

    def whole(self) -> bytes:
        """The whole object's bytes."""
        return self(0, self.size).tobytes()
