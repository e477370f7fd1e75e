"""One listed object as a callable over its byte ranges (`ListedObject`): readers of many
small ranges of large objects (cube windows) hold it, and it reads through
`FsspecStore.read_listed_range` (the store's retries, timeouts, version check and block
cache; no stat; a short range is an EOFError naming the object and the range).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.stores.remote import FsspecStore


@dataclass(frozen=True)
class ListedObject:
    """A callable `(offset, count) -> uint8 array` over one listed object (pickles with its
    store, so readers holding it go to DataLoader workers)."""

    store: FsspecStore
    url: str
    size: int
    version: int

    def __call__(self, offset: int, count: int) -> np.ndarray:
        return self.store.read_listed_range(self.url, self.size, self.version, offset, count)

    def whole(self) -> bytes:
        """The whole object's bytes."""
        return self(0, self.size).tobytes()
