"""A bounded local cache of fixed-size blocks of remote objects, evicted least recently used.

Each block is one file `<cache_dir>/<sha256 of (url, version)>-<block>.blk`, the block's
bytes followed by their CRC-32, written to a temporary name and renamed, so several
processes (ranks on one node, loader workers) share one cache safely: a reader sees a whole
block or none. Use touches a file's mtime (at most once a second per block and process);
when the cache holds more than `limit` bytes, the files with the oldest mtimes go first. A
block removed by another process between listing and reading is simply fetched again.

Blocks are verified: the first time a process uses a block file it checks the whole file
against its CRC-32, then keeps it mapped (`dali_pipes.stores.mapped_blocks`: the most
recently used `maps` files per process), so a warm read is a copy of the bytes wanted out of
the page cache, with no system call but one `fstat`, and `pieces` hands out views of the
mapped blocks without copying (readers that gather small parts of a range: cube windows).
A file whose bytes do not match (zero-filled after a crash, a flipped bit, another
program's write) is removed and the block fetched again, with one warning naming the file;
it is never served. An object without a version (its server sends neither ETag nor
Last-Modified) is read without the cache, with one warning: a change to it could not be
told from its blocks.

The cache never makes a read fail: a cache folder that cannot be made or written (full disk,
no permission, a file in its place) is bypassed after one warning naming it (blocks already
there are still read), and every block is checked for its length before use: a short block
file is fetched again, a short answer from the server is an EOFError naming the object and
the range.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from dali_pipes.stores.mapped_blocks import BAD, DEFAULT_MAPS, DIGEST, MappedBlocks, digest, touch
from dali_pipes.stores.read_ahead import ReadAhead

__all__ = ["DEFAULT_BLOCK", "DIGEST", "BlockCache"]

DEFAULT_BLOCK = 4 << 20  # bytes a block: one ranged GET each, and one memory map
Fetch = Callable[[int, int], bytes]


class BlockCache:
    """Blocks of `block_size` bytes of remote objects under `cache_dir`, at most `limit` bytes.

    Args:
        cache_dir: the cache folder (created).
        limit: the most bytes the cache keeps (None: no bound).
        block_size: bytes per block.
        maps: block files each process keeps mapped (`MappedBlocks`).
        ahead: fetches the blocks after a miss in the background (None: no read-ahead).
    """

    def __init__(self, cache_dir: str, *, limit: int | None = None,
                 block_size: int = DEFAULT_BLOCK, maps: int = DEFAULT_MAPS,
                 ahead: ReadAhead | None = None):
        if limit is not None and limit < block_size:
            raise ValueError(f"cache_limit={limit} is smaller than one block ({block_size})")
        self.dir, self.limit, self.block_size = Path(cache_dir), limit, block_size
        self.hits = self.misses = 0
        self.writable, self._unversioned_seen = True, False
        self.blocks, self.ahead = MappedBlocks(maps), ahead
        self._folder = os.fspath(self.dir)
        self._stems: dict[tuple[str, int], str] = {}
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

    def read(self, url: str, version: int | None, object_size: int, offset: int, size: int,
             fetch: Fetch) -> np.ndarray:
        """Bytes `offset`..`offset + size` of `url`, from cached blocks or `fetch(start, end)`,
        as a new array (the wanted bytes of each block copied once).

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
        parts = self.pieces(url, version, object_size, offset, size, fetch)
        if len(parts) == 1:
            return parts[0][1].copy()
        out = np.empty(size, dtype=np.uint8)
        for start, part in parts:
            out[start - offset:start - offset + len(part)] = part
        return out

    def pieces(self, url: str, version: int | None, object_size: int, offset: int, size: int,
               fetch: Fetch) -> list[tuple[int, np.ndarray]]:
        """Bytes `offset`..`offset + size` of `url` as (first byte, read-only bytes) pieces in
        order, one per block: views of the cached block files (mapped: nothing is copied)
        or of the bytes fetched. Arguments as `read`'s."""
        if version is None:
            self._uncached(url)
            return [(offset, np.frombuffer(fetch(offset, offset + size), np.uint8))]
        stem = self._stem(url, version)
        first, last = offset // self.block_size, (offset + size - 1) // self.block_size
        if first == last:  # inside one block: the common case
            at = offset - first * self.block_size
            return [(offset, self._block(url, stem, first, object_size, fetch)[at:at + size])]
        out = []
        for block in range(first, last + 1):
            start = block * self.block_size
            lo, hi = max(offset, start), min(offset + size, start + self.block_size)
            data = self._block(url, stem, block, object_size, fetch)
            out.append((lo, data[lo - start:hi - start]))
        return out

    def _stem(self, url: str, version: int) -> str:
        """The block files' name stem of (url, version) (remembered: one hash per object)."""
        stem = self._stems.get((url, version))
        if stem is None:
            if len(self._stems) >= 1 << 14:
                self._stems.clear()
            stem = hashlib.sha256(f"{url}\0{version}".encode()).hexdigest()[:32]
            self._stems[(url, version)] = stem
        return stem

    def _path(self, stem: str, block: int) -> str:
        """The file of block `block` of the object whose files are named `stem`."""
        return f"{self._folder}/{stem}-{block}.blk"

    def _block(self, url: str, stem: str, block: int, object_size: int, fetch: Fetch
               ) -> np.ndarray:
        """The whole block: from its file (mapped), else fetched (and stored)."""
        path = self._path(stem, block)
        start = block * self.block_size
        end = min(start + self.block_size, object_size)
        first_use = self.ahead is not None and not self.blocks.holds(path)
        found = self.blocks.get(path, end - start)
        if not isinstance(found, str):
            self.hits += 1
            if first_use:  # a block fetched ahead: keep the read-ahead going
                self._read_ahead(url, stem, block, object_size, fetch, whole_runs=True)
            return found
        if found == BAD:
            self._drop(path, url, start, end)
        self.misses += 1
        data = self._from_ahead(path, end - start)
        fetched_ahead = data is not None
        if data is None:
            data = self._fetched(url, fetch, start, end)
            if self.writable:
                self._store(path, data)
        if self.ahead is not None:
            self._read_ahead(url, stem, block, object_size, fetch, whole_runs=fetched_ahead)
        return np.frombuffer(data, np.uint8)

    def _from_ahead(self, path: str, length: int) -> bytes | np.ndarray | None:
        """The block when a read-ahead fetched it (waiting for its request), else None."""
        if self.ahead is None:
            return None
        data = self.ahead.take(path)
        if data is None:  # its request may have ended between our look and now
            found = self.blocks.get(path, length)
            return None if isinstance(found, str) else found
        return data

    @staticmethod
    def _fetched(url: str, fetch: Fetch, start: int, end: int) -> bytes:
        data = fetch(start, end)
        if len(data) != end - start:
            raise EOFError(f"{url}: bytes {start}..{end} requested, got {len(data)} (the "
                           "server answered short)")
        return data

    def _read_ahead(self, url: str, stem: str, block: int, object_size: int, fetch: Fetch,
                    *, whole_runs: bool = False) -> None:
        """Ask for the blocks after `block` that are neither cached nor on their way, in
        runs of adjacent blocks (`dali_pipes.stores.read_ahead`); `whole_runs`: only runs
        of `merge` blocks (or up to the object's end), as the first use of a block fetched
        ahead moves the window one block on."""
        ahead = self.ahead
        if ahead is None or not self.writable:
            return
        blocks = -(-object_size // self.block_size)
        stop = min(block + 1 + ahead.blocks, blocks)
        run: list[str] = []  # the files of adjacent blocks wanted, from block `first`
        first = block + 1
        for b in range(block + 1, stop + 1):
            path = self._path(stem, b)
            wanted = b < stop and not ahead.busy(path) and not os.path.exists(path)
            if wanted:
                if not run:
                    first = b
                run.append(path)
            if run and (not wanted or len(run) == ahead.merge):
                if not whole_runs or len(run) == ahead.merge or first + len(run) == blocks:
                    ahead.submit(run, partial(self._fetch_run, url, run, first, object_size,
                                              fetch))
                run = []

    def _fetch_run(self, url: str, paths: list[str], first: int, object_size: int,
                   fetch: Fetch) -> list[bytes]:
        """Blocks `first`.. (one per path) in one request, stored; their bytes."""
        start = first * self.block_size
        end = min(start + len(paths) * self.block_size, object_size)
        data = self._fetched(url, fetch, start, end)
        blocks = [data[i:i + self.block_size] for i in range(0, len(data), self.block_size)]
        for path, part in zip(paths, blocks, strict=True):
            if self.writable:
                self._store(path, part)
        return blocks

    def _uncached(self, url: str) -> None:
        if not self._unversioned_seen:
            self._unversioned_seen = True
            warnings.warn(f"{url}: the server sends neither ETag nor Last-Modified for it, "
                          "so a change to it could not be told from its cached blocks; it "
                          "and every other such object are read without the block cache",
                          RuntimeWarning, stacklevel=5)

    def _drop(self, path: str, url: str, start: int, end: int) -> None:
        """Remove a block file whose bytes do not match their digest (one warning)."""
        warnings.warn(f"{path}: cached block of {url} (bytes {start}..{end}) does not match "
                      "its checksum (damaged on disk or written by another program); "
                      "dropped and fetched again", RuntimeWarning, stacklevel=5)
        self.blocks.forget(path)
        try:
            os.unlink(path)
        except OSError:  # gone already, or a read-only cache: fetched and served all the same
            pass

    def _store(self, path: str, data: bytes) -> None:
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # reads and read-ahead
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.write(digest(data))
                st = os.fstat(f.fileno())
            touch(tmp)
            os.replace(tmp, path)
            self.blocks.wrote(path, st)
            self._evict()
        except OSError as exc:
            try:
                os.unlink(tmp)
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
