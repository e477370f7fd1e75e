"""One listed object as a callable over its byte ranges (`ListedObject`): readers of many
small ranges of large objects (cube windows) hold it, and it reads through the store's
`read_range` with the listed size and version (for an FsspecStore: its retries, timeouts,
version check and block cache; no stat; a range past the object is an EOFError naming the
object and the range). `pieces` gives a range as read-only pieces where the store can hand
them out without copying (an FsspecStore's mapped cache blocks, through the reader its
`pieces_reader` makes once per object), for readers that take only a few small parts of a
long range.
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
        self._inside(offset, count)
        return self.store.read_range(self.url, offset, count, (self.size, self.version))

    def pieces(self, offset: int, count: int) -> list[tuple[int, np.ndarray]]:
        """Bytes `offset`..`offset + count` as (first byte, read-only uint8 array) pieces in
        order: the store's `pieces_reader` for this object where it has one (made once per
        process), else one piece."""
        self._inside(offset, count)
        reader = self.__dict__.get("_reader")
        if reader is None:
            make = getattr(self.store, "pieces_reader", None)
            reader = make(self.url, (self.size, self.version)) if make is not None else \
                (lambda at, n: [(at, self(at, n))])
            object.__setattr__(self, "_reader", reader)
        return reader(offset, count)

    def __getstate__(self) -> dict:  # the reader is this process's
        return {k: v for k, v in self.__dict__.items() if k != "_reader"}

    @property
    def piece_size(self) -> int:
        """Bytes of the pieces `pieces` hands out without copying (0: none)."""
        return getattr(self.store, "piece_size", 0)

    def _inside(self, offset: int, count: int) -> None:
        if offset < 0 or count < 0 or offset + count > self.size:
            raise EOFError(f"{self.url}: bytes {offset}..{offset + count} requested, the "
                           f"object was listed with {self.size}")

    def whole(self) -> bytes:
        """The whole object's bytes."""
        return self(0, self.size).tobytes()
