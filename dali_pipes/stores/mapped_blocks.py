"""Block files of the cache held open in this process: each verified once, then read from
its memory map, without a system call per read.

A block file is `length` bytes of data followed by their CRC-32 (`DIGEST` bytes). The first
time this process uses a file (`MappedBlocks.get`), it is opened, its size checked, mapped
read-only and, unless this process wrote or checked that very file before (same device and
inode), its data checked against the CRC-32; the map is then kept (at most `limit` maps,
least recently used dropped first) and later reads are views into it: the bytes are those
the page cache already holds, shared by every process of the node, never copied whole.

A kept map is asked for its file's size before each read (one `fstat` on its descriptor):
a file truncated in place by another program is dropped and read again rather than
touched past its end (which would kill the process with SIGBUS), as the local readers do
(`dali_pipes.formats._mapped`). A file replaced under its name after it was mapped keeps
being served from the map, which holds the bytes this process checked. Use marks the file
(its mtime, which the cache's eviction orders by) at most once per `TOUCH_EVERY` seconds
per block and process. A file that cannot be mapped is read whole into memory instead.
"""
from __future__ import annotations

import mmap
import os
import time
import zlib
from collections import OrderedDict

import numpy as np

DIGEST = 4  # bytes of the CRC-32 stored after each block's data
TOUCH_EVERY = 1.0  # seconds between two marks of one block as used, per process
DEFAULT_MAPS = 32  # block files each process keeps mapped
MISS, BAD = "miss", "bad"


def digest(data) -> bytes:
    """The CRC-32 stored after a block's bytes."""
    return zlib.crc32(data).to_bytes(DIGEST, "little")


def touch(path: str) -> None:
    """Mark a block file used: mtime = now, from the fine clock (file systems stamp files
    with a coarse one); a read-only cache still serves its blocks."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except OSError:
        pass


class _Held:
    """One kept block file: its map (None: read into memory), its data, the last mark."""

    __slots__ = ("mm", "data", "marked")

    def __init__(self, mm: mmap.mmap | None, data: np.ndarray):
        self.mm, self.data, self.marked = mm, data, time.monotonic()


def _load(fd: int, size: int) -> tuple[mmap.mmap | None, np.ndarray]:
    """The file's bytes: mapped, else (a file system without maps) read into memory."""
    try:
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None, np.frombuffer(os.pread(fd, size, 0), np.uint8)
    return mm, np.frombuffer(mm, np.uint8)


class MappedBlocks:
    """The block files this process has checked (`verified`: path -> (device, inode)) and
    the `limit` most recently used of them, mapped."""

    def __init__(self, limit: int = DEFAULT_MAPS):
        self.limit = limit
        self.verified: dict[str, tuple[int, int]] = {}
        self._held: OrderedDict[str, _Held] = OrderedDict()

    def __getstate__(self) -> dict:  # checked and mapped by this process, not the next
        return {"limit": self.limit, "verified": {}, "_held": OrderedDict()}

    def holds(self, path: str) -> bool:
        """Whether `path` is mapped here (a use of it is no first use)."""
        return path in self._held

    def get(self, path: str, length: int) -> np.ndarray | str:
        """The `length` data bytes of block file `path` (a read-only view), MISS when the
        file is missing or not `length` bytes and a digest, BAD when its bytes do not
        match their digest."""
        held = self._held.get(path)
        if held is not None:
            if held.mm is None or held.mm.size() == length + DIGEST:
                self._held.move_to_end(path)
                now = time.monotonic()
                if now - held.marked > TOUCH_EVERY:
                    held.marked = now
                    touch(path)
                return held.data[:length]
            del self._held[path]  # truncated in place since: read it again
        return self._open(path, length)

    def _open(self, path: str, length: int) -> np.ndarray | str:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return MISS
        try:
            st = os.fstat(fd)
            if st.st_size != length + DIGEST:
                return MISS
            mm, data = _load(fd, st.st_size)
        except OSError:
            return MISS
        finally:
            os.close(fd)
        if len(data) != length + DIGEST:  # cut short while read
            return MISS
        if self.verified.get(path) != (st.st_dev, st.st_ino):
            if digest(data[:length]) != data[length:].tobytes():
                return BAD
            self.verified[path] = (st.st_dev, st.st_ino)
        self._held[path] = _Held(mm, data)
        if len(self._held) > self.limit:
            # Dropped, not closed: a view handed out keeps its map alive until it goes.
            self._held.popitem(last=False)
        touch(path)
        return data[:length]

    def forget(self, path: str) -> None:
        """Drop what this process knew of `path` (a damaged file, removed)."""
        self.verified.pop(path, None)
        self._held.pop(path, None)

    def wrote(self, path: str, st: os.stat_result) -> None:
        """This process wrote `path` (its bytes need no check) as the file of `st`."""
        self.verified[path] = (st.st_dev, st.st_ino)
