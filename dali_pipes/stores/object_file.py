"""A read-only, seekable file object over an object in a store, or a byte range of one.

`StoreFile` reads through `store.read_range(url, offset, size, stat)` (the store's retries,
timeouts, version check and block cache apply; `stat`: the object's listed size and
version, where known), so a library that takes file objects (PyAV, tarfile) reads
only the byte ranges it asks for: in chunks of `chunk` bytes (a small read-ahead; the last
chunk is kept), never the whole object. `base` and `size` make it a view of one member of a
tar shard (`base` = the member's data offset in the shard).

`ObjectBytes` is what several file objects over one object share: chunks kept for the next
opener (`keep=True` while a container's header and index are read, so opening the same
video again costs no fetch) and the count of bytes and requests fetched. Kept chunks are
bounded per object by `keep_limit`.

`skip_ranges(starts, ends)` ends the kept header and marks ranges to serve as zeros without
fetching (probing an MP4 demuxes the packets for their pts, which come from its index; the
packets' bytes are never looked at: `dali_pipes.formats.video.probe_file`).
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

DEFAULT_CHUNK = 64 << 10
DEFAULT_KEEP_LIMIT = 4 << 20


@dataclass
class ObjectBytes:
    """One object (or member) as files over it see it: where it lies and what is kept."""

    store: object
    url: str
    size: int
    base: int = 0
    chunk: int = DEFAULT_CHUNK
    keep_limit: int = DEFAULT_KEEP_LIMIT
    kept: dict[int, np.ndarray] = field(default_factory=dict)
    fetched: int = 0  # bytes asked of the store
    requests: int = 0
    stat: tuple[int, int] | None = None  # the whole object's listed (size, version)

    def open(self, *, keep: bool = False) -> StoreFile:
        """A new file object over the object (`keep`: keep every chunk it fetches)."""
        return StoreFile(self, keep=keep)

    def fetch(self, offset: int, size: int) -> np.ndarray:
        """`size` bytes from `offset` of the object, read from the store (counted)."""
        data = self.store.read_range(self.url, self.base + offset, size,  # type: ignore[attr-defined]
                                     self.stat)
        self.fetched += size
        self.requests += 1
        return data

    def chunk_at(self, index: int, keep: bool) -> np.ndarray:
        """Chunk `index` of the object: kept, or fetched (and kept with `keep`)."""
        data = self.kept.get(index)
        if data is None:
            start = index * self.chunk
            data = self.fetch(start, min(self.chunk, self.size - start))
            held = sum(len(c) for c in self.kept.values())
            if keep and held + len(data) <= self.keep_limit:
                self.kept[index] = data
        return data


class StoreFile(io.RawIOBase):
    """A read-only, seekable binary file over `obj` (see the module docstring)."""

    def __init__(self, obj: ObjectBytes, *, keep: bool = False):
        super().__init__()
        self.obj, self.keep, self.pos = obj, keep, 0
        self._last: tuple[int, np.ndarray] | None = None
        self._holes: tuple[np.ndarray, np.ndarray] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.obj.size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.obj.url}: seek to {base + offset}, before the start")
        self.pos = base + offset
        return self.pos

    def skip_ranges(self, starts: np.ndarray, ends: np.ndarray) -> None:
        """Serve bytes `starts[i]..ends[i]` as zeros from now on, without fetching them."""
        self.keep = False  # the header has been read
        if len(starts):
            order = np.argsort(starts, kind="stable")
            self._holes = (np.asarray(starts, np.int64)[order],
                           np.asarray(ends, np.int64)[order])

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(0, self.obj.size - self.pos))
        done = 0
        while done < want:
            done += self._read_some(view[done:want])
        return done

    def _read_some(self, view: memoryview) -> int:
        """Some bytes at `pos` into `view` (at least one); advances `pos`."""
        if self._holes is not None:
            n = self._read_around_holes(view)
        else:
            index, at = divmod(self.pos, self.obj.chunk)
            data = self._chunk(index)
            n = min(len(view), len(data) - at)
            view[:n] = data[at:at + n].data
        self.pos += n
        return n

    def _chunk(self, index: int) -> np.ndarray:
        if self._last is None or self._last[0] != index:
            self._last = (index, self.obj.chunk_at(index, self.keep))
        return self._last[1]

    def _read_around_holes(self, view: memoryview) -> int:
        """Zeros inside a skipped range; else exactly the bytes up to the next one."""
        assert self._holes is not None
        starts, ends = self._holes
        i = int(np.searchsorted(starts, self.pos, side="right")) - 1
        if i >= 0 and ends[i] > self.pos:  # inside a hole
            n = min(len(view), int(ends[i]) - self.pos)
            view[:n] = bytes(n)
            return n
        nxt = int(starts[i + 1]) if i + 1 < len(starts) else self.obj.size
        n = min(len(view), nxt - self.pos)
        index, at = divmod(self.pos, self.obj.chunk)
        kept = self.obj.kept.get(index)
        if kept is not None:  # read while opening: never fetched twice
            n = min(n, len(kept) - at)
            view[:n] = kept[at:at + n].data
        else:
            view[:n] = self.obj.fetch(self.pos, n).data
        return n
