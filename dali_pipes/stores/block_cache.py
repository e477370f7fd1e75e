"""A bounded local cache of fixed-size blocks of remote objects, evicted least recently used.

Each block is one file `<cache_dir>/<sha256 of (url, version)>-<block>.blk`, the block's
bytes followed by their CRC-32, written to a temporary name and renamed, so several
processes (ranks on one node, loader workers) share one cache safely: a reader sees a whole
block or none. A hit touches the file's mtime; when the cache holds more than `limit` bytes,
the files with the oldest mtimes go first. A block removed by another process between
listing and reading is simply fetched again.

Blocks are verified: the first time a process uses a block file it reads it whole and checks
its CRC-32 (later reads of the same file, same inode, take only the bytes they want). A file
whose bytes do not match (zero-filled after a crash, a flipped bit, another program's write)
is removed and the block fetched again, with one warning naming the file; it is never
served. An object without a version (its server sends neither ETag nor Last-Modified) is
read without the cache, with one warning: a change to it could not be told from its blocks.

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
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEFAULT_BLOCK = 1 << 20
DIGEST = 4  # bytes of the CRC-32 stored after each block's data


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


def _digest(data) -> bytes:
    return zlib.crc32(data).to_bytes(DIGEST, "little")


def _used(fd: int) -> None:
    now = time.time_ns()
    try:
        os.utime(fd, ns=(now, now))
    except OSError:  # a read-only cache still serves its blocks
        pass


HIT, MISS, BAD = "hit", "miss", "bad"


def _read_into(path: Path, length: int, at: int, view: np.ndarray, verified: dict) -> str:
    """Fill `view` from byte `at` of the block file `path` and mark it used (HIT); MISS
    when the file is missing (never cached, evicted by another process, unreadable) or
    does not hold `length` bytes and their digest; BAD when the bytes do not match the
    digest. A file is read whole and checked the first time this process uses it
    (`verified` maps its path to its device and inode then); later reads take only
    the bytes wanted."""
    name = os.fspath(path)  # the memo's key: a str hashes faster than a Path
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return MISS
    try:
        st = os.fstat(fd)
        if st.st_size != length + DIGEST:
            return MISS
        if verified.get(name) == (st.st_dev, st.st_ino):
            if _preadv(fd, view, at) != len(view):
                return MISS
        else:
            whole = np.empty(length + DIGEST, np.uint8)
            if _preadv(fd, whole, 0) != len(whole):
                return MISS
            if _digest(whole[:length]) != whole[length:].tobytes():
                return BAD
            view[:] = whole[at:at + len(view)]
            verified[name] = (st.st_dev, st.st_ino)
        _used(fd)
        return HIT
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
        self.writable, self._unversioned_seen = True, False
        self._verified: dict[str, tuple[int, int]] = {}  # block files checked here
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._bypass(exc)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_verified": {}}  # checked by this process, not the next

    def _bypass(self, exc: OSError) -> None:
        """Stop writing blocks (once, with a warning naming the folder)."""
        if self.writable:
            self.writable = False
            warnings.warn(f"{self.dir}: the block cache cannot be written ({exc}); reads go "
                          "to the server without caching", RuntimeWarning, stacklevel=4)

    def read(self, url: str, version: int | None, object_size: int, offset: int, size: int,
             fetch: Callable[[int, int], bytes]) -> np.ndarray:
        """Bytes `offset`..`offset + size` of `url`, from cached blocks or `fetch(start, end)`.

        A cached block is not read whole: only the bytes wanted of it are read, straight
        into the result (one `preadv`).

        Args:
            url: the object.
            version: what changes when the object does (its blocks are then other files);
                None for an object without one (no ETag, no Last-Modified): read without
                the cache, as a change to it could not be told from its cached blocks.
            object_size: the object's size (the last block is shorter).
            offset: the first byte.
            size: how many bytes.
            fetch: reads bytes start..end (end exclusive) of the object.

        Returns:
            A uint8 array.
        """
        if version is None:
            self._uncached(url)
            return np.frombuffer(fetch(offset, offset + size), np.uint8).copy()
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
        found = _read_into(path, end - start, at, view, self._verified)
        if found == HIT:
            self.hits += 1
            return
        if found == BAD:
            self._drop(path, url, start, end)
        self.misses += 1
        data = fetch(start, end)
        if len(data) != end - start:
            raise EOFError(f"{url}: bytes {start}..{end} requested, got {len(data)} (the "
                           "server answered short)")
        view[:] = np.frombuffer(data, np.uint8)[at:at + len(view)]
        if self.writable:
            self._store(path, data)

    def _uncached(self, url: str) -> None:
        if not self._unversioned_seen:
            self._unversioned_seen = True
            warnings.warn(f"{url}: the server sends neither ETag nor Last-Modified for it, "
                          "so a change to it could not be told from its cached blocks; it "
                          "and every other such object are read without the block cache",
                          RuntimeWarning, stacklevel=4)

    def _drop(self, path: Path, url: str, start: int, end: int) -> None:
        """Remove a block file whose bytes do not match their digest (one warning)."""
        warnings.warn(f"{path}: cached block of {url} (bytes {start}..{end}) does not match "
                      "its checksum (damaged on disk or written by another program); "
                      "dropped and fetched again", RuntimeWarning, stacklevel=4)
        self._verified.pop(os.fspath(path), None)
        try:
            path.unlink(missing_ok=True)
        except OSError:  # a read-only cache: the block is fetched and served all the same
            pass

    def _store(self, path: Path, data: bytes) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.write(_digest(data))
                st = os.fstat(f.fileno())
            _touch(tmp)
            os.replace(tmp, path)
            self._verified[os.fspath(path)] = (st.st_dev, st.st_ino)
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
