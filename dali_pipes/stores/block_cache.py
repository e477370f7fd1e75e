"""A bounded local cache of fixed-size blocks of remote objects, evicted least recently used.

Each block is one file `<cache_dir>/<sha256 of (url, version)>-<block>.blk`, written to a
temporary name and renamed, so several processes (ranks on one node, loader workers) share
one cache safely: a reader sees a whole block or none. A hit touches the file's mtime; when
the cache holds more than `limit` bytes, the files with the oldest mtimes go first. A block
removed by another process between listing and reading is simply fetched again.

The cache never makes a read fail: a cache folder that cannot be made or written (full disk,
no permission, a file in its place) is bypassed after one warning naming it (blocks already
there are still read), and every block is checked for its length before use: a short block
file is fetched again, a short answer from the server is an EOFError naming the object and
the range.
"""
from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEFAULT_BLOCK = 1 << 20


def _touch(path: Path) -> None:
    """mtime = now, from the fine clock (file systems stamp files with a coarse one)."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _preadv(fd: int, view: np.ndarray, at: int) -> int:
    """Bytes read from `fd` at `at` straight into `view` (a copy where preadv is missing)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view.data], at)
    data = os.pread(fd, len(view), at)
    view[:len(data)] = np.frombuffer(data, np.uint8)
    return len(data)


def _read_into(path: Path, length: int, at: int, view: np.ndarray) -> bool:
    """Fill `view` from byte `at` of the block file `path` and mark it used; False when the
    file is missing (never cached, evicted by another process, unreadable) or does not
    hold the block's `length` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size != length or _preadv(fd, view, at) != len(view):
            return False
        now = time.time_ns()
        try:
            os.utime(fd, ns=(now, now))
        except OSError:  # a read-only cache still serves its blocks
            pass
        return True
    finally:
        os.close(fd)


class BlockCache:
    """Blocks of `block_size` bytes of remote objects under `cache_dir`, at most `limit` bytes.

    Args:
        cache_dir: the cache folder (created).
        limit: the most bytes the cache keeps (None: no bound).
        block_size: bytes per block.
    """

    def __init__(self, cache_dir: str, *, limit: int | None = None,
                 block_size: int = DEFAULT_BLOCK):
        if limit is not None and limit < block_size:
            raise ValueError(f"cache_limit={limit} is smaller than one block ({block_size})")
        self.dir, self.limit, self.block_size = Path(cache_dir), limit, block_size
        self.hits = self.misses = 0
        self.writable = True
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._bypass(exc)

    def _bypass(self, exc: OSError) -> None:
        """Stop writing blocks (once, with a warning naming the folder)."""
        if self.writable:
            self.writable = False
            warnings.warn(f"{self.dir}: the block cache cannot be written ({exc}); reads go "
                          "to the server without caching", RuntimeWarning, stacklevel=4)

    def read(self, url: str, version: int, object_size: int, offset: int, size: int,
             fetch: Callable[[int, int], bytes]) -> np.ndarray:
        """Bytes `offset`..`offset + size` of `url`, from cached blocks or `fetch(start, end)`.

        A cached block is not read whole: only the bytes wanted of it are read, straight
        into the result (one `preadv`).

        Args:
            url: the object.
            version: what changes when the object does (its blocks are then other files).
            object_size: the object's size (the last block is shorter).
            offset: the first byte.
            size: how many bytes.
            fetch: reads bytes start..end (end exclusive) of the object.

        Returns:
            A uint8 array.
        """
        out = np.empty(size, dtype=np.uint8)
        first, last = offset // self.block_size, (offset + size - 1) // self.block_size
        stem = hashlib.sha256(f"{url}\0{version}".encode()).hexdigest()[:32]
        for block in range(first, last + 1):
            start = block * self.block_size
            lo, hi = max(offset, start), min(offset + size, start + self.block_size)
            self._block_into(url, stem, block, object_size, fetch, lo - start,
                             out[lo - offset:hi - offset])
        return out

    def _block_into(self, url: str, stem: str, block: int, object_size: int, fetch, at: int,
                    view: np.ndarray) -> None:
        """Bytes `at`..`at + len(view)` of the block into `view`: from its file, else fetched
        (and the whole block stored)."""
        path = self.dir / f"{stem}-{block}.blk"
        start = block * self.block_size
        end = min(start + self.block_size, object_size)
        if _read_into(path, end - start, at, view):
            self.hits += 1
            return
        self.misses += 1
        data = fetch(start, end)
        if len(data) != end - start:
            raise EOFError(f"{url}: bytes {start}..{end} requested, got {len(data)} (the "
                           "server answered short)")
        view[:] = np.frombuffer(data, np.uint8)[at:at + len(view)]
        if self.writable:
            self._store(path, data)

    def _store(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(data)
            _touch(tmp)
            os.replace(tmp, path)
            self._evict()
        except OSError as exc:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            self._bypass(exc)

    def size(self) -> int:
        """Bytes held now."""
        if not self.dir.is_dir():
            return 0
        return sum(e.stat().st_size for e in os.scandir(self.dir) if e.name.endswith(".blk"))

    def _evict(self) -> None:
        if self.limit is None:
            return
        entries = []
        for entry in os.scandir(self.dir):
            if entry.name.endswith(".blk"):
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                entries.append((st.st_mtime_ns, st.st_size, entry.path))
        total = sum(e[1] for e in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            total -= size
