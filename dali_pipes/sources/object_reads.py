"""One listed object as a callable over its byte ranges (`ListedObject`): readers of many
small ranges of large objects (cube windows) hold it, and it reads through the store's
`read_range` with the listed size and version (for an FsspecStore: its retries, timeouts,
version check and block cache; no stat; a range past the object is an EOFError naming the
object and the range).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.stores import Store


@dataclass(frozen=True)
class ListedObject:
    """A callable `(offset, count) -> uint8 array` over one listed object (pickles with its
    store, so readers holding it go to DataLoader workers)."""

    store: Store
    url: str
    size: int
    version: int

    def __call__(self, offset: int, count: int) -> np.ndarray:
        if offset < 0 or count < 0 or offset + count > self.size:
            raise EOFError(f"{self.url}: bytes {offset}..{offset + count} requested, the "
                           f"object was listed with {self.size}")
        return self.store.read_range(self.url, offset, count, (self.size, self.version))

    def whole(self) -> bytes:
        """The whole object's bytes."""
        return self(0, self.size).tobytes()
