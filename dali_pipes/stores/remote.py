"""The fsspec store: shards behind any fsspec URL (`s3://`, `gs://`, `https://`, ...).

Byte-range reads, checked against the object's version recorded at listing
(`dali_pipes.stores.remote_read`: a replaced object raises `ObjectChanged` naming it) and
against the range asked for (an answer holding other bytes, by its Content-Range, or of an
object of another size than listed raises `RangeMismatch` naming the URL and both ranges),
and retried with exponential backoff on transient failures (timeouts, resets, HTTP
5xx/408/429); a permanent failure (404/NoSuchKey/NoSuchBucket, 403/AccessDenied, a refused
connection) is not retried, and it or the last failed attempt raises `StoreError` naming the
URL, the status where there is one, and the attempts. Each request, reads, stats and
listings alike, is bounded as a whole by the timeout: connection, headers and body together
(`dali_pipes.stores.bounded`), so a server trickling its answer fails as a timeout naming
the time spent. A read that returns fewer bytes than asked is an `EOFError` naming the URL
and the range. A server that sends no Content-Length (chunked answers) is asked for an
object's first byte to learn its size. With `cache_dir`, reads go through a bounded block
cache (`dali_pipes.stores.block_cache`) keyed by URL and version, each block checked against
its checksum once per process and then read from its memory map; a cache that cannot be
written is bypassed with one warning, and objects without a validator (no ETag, no
Last-Modified) are not cached. After a read misses a block, the next blocks of the object
are fetched in the background (`read_ahead` of them, adjacent ones in one request, a few
requests in flight per process: `dali_pipes.stores.read_ahead`), so a first pass keeps the
server busy rather than waiting on one block at a time. `read_pieces` hands a range out as
views of the cached blocks, without copying (cube windows take a few elements of a long
range). The file system object is made per process (after a fork too) on first use, so a
store pickles into DataLoader workers and DALI's parallel external_source workers and each
opens its own connections.

Folders behind URLs: `list` lists every object under a prefix, with sizes and versions, in
one listing call (`fs.find(..., detail=True)`); `read_range` with the listed (size, version)
reads without a stat, through the same retries, timeouts and block cache. HTTP(S) servers
have no listing an fsspec file system can rely on, so `list` refuses them (`glob` reads
the `.tar` links of a shard folder's page instead). A missing object is a `MissingObject`
(a `StoreError` and a `FileNotFoundError`).
"""
from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from dali_pipes.stores import Entry
from dali_pipes.stores.block_cache import DEFAULT_BLOCK, BlockCache
from dali_pipes.stores.bounded import BoundedFileSystem
from dali_pipes.stores.object_file import ObjectBytes
from dali_pipes.stores.read_ahead import ReadAhead
from dali_pipes.stores.remote_read import (
    NO_VERSION,
    ObjectChanged,
    RangeMismatch,
    cause,
    get_range,
    rebuilt,
    sized,
    status,
    transient,
    version_of,
)

__all__ = ["FsspecStore", "MissingObject", "ObjectChanged", "StoreError", "is_url"]

READ_AHEAD = 2  # blocks fetched in the background after a miss


class StoreError(OSError):
    """A remote read failed for good: names the URL, the status (or None) and attempts."""

    def __init__(self, url: str, what: str, exc: BaseException, attempts: int):
        self.url, self.status, self.attempts = url, status(exc), attempts
        shown = f" (status {self.status})" if self.status else ""
        first = cause(exc)
        super().__init__(f"{url}: {what} failed{shown} after {attempts} attempt"
                         f"{'s' * (attempts > 1)}: {type(first).__name__}: {first}")

    def __reduce__(self):
        return rebuilt, (type(self), str(self), self.__dict__)


class MissingObject(StoreError, FileNotFoundError):
    """A remote object that does not exist (404, NoSuchKey): a FileNotFoundError too."""


def store_error(url: str, what: str, exc: BaseException, attempts: int) -> StoreError:
    """The StoreError of a failed request (a MissingObject for a 404)."""
    cls = MissingObject if status(exc) == 404 else StoreError
    return cls(url, what, exc, attempts)


def is_url(path) -> bool:
    """Whether `path` is a URL with a protocol other than local files."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


class FsspecStore:
    """Bytes of remote objects through fsspec.

    Args:
        storage_options: passed to the fsspec file system (credentials, endpoint_url, ...).
        cache_dir: a local folder for a block cache (None: no cache).
        cache_limit: the most bytes the cache keeps (None: no bound).
        retries: attempts after the first on transient failures.
        backoff: seconds before the first retry, doubled after each.
        timeout: seconds each request may take.
        block_size: bytes per cached block.
        read_ahead: with a cache, blocks fetched in the background after a read misses
            one (`dali_pipes.stores.read_ahead`; 0: none).
    """

    supports_listing = True  # but not of http(s) folders: see `list`

    def __init__(self, *, storage_options: dict | None = None, cache_dir: str | None = None,
                 cache_limit: int | None = None, retries: int = 3, backoff: float = 0.2,
                 timeout: float = 30.0, block_size: int = DEFAULT_BLOCK,
                 read_ahead: int = READ_AHEAD):
        self.storage_options = dict(storage_options or {})
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.cache_dir = cache_dir
        # a read waits for a block fetched ahead as long as its own request could take
        ahead = ReadAhead(blocks=read_ahead, wait=timeout * (retries + 1) +
                          backoff * 2 ** retries) if read_ahead > 0 else None
        self.cache = (BlockCache(cache_dir, limit=cache_limit, block_size=block_size,
                                 ahead=ahead) if cache_dir else None)
        self._fs: dict[str, Any] = {}
        self._stats: dict[str, tuple[int, int]] = {}  # per URL, taken once per listing
        self._fetchers: dict[tuple[str, int, int], Callable[[int, int], bytes]] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fs": {}, "_fetchers": {}}

    def stat(self, url: str) -> tuple[int, int]:
        """(size, version): the version is a number that changes when the object does (from
        its ETag, else its modification time). Asked once per URL, at listing: every read
        after it checks that its answer is still that version."""
        if url in self._stats:
            return self._stats[url]
        protocol = url.split("://", 1)[0]
        info = self._call(url, "stat",
                          lambda fs, path: sized(fs, protocol, url, fs.info(path)))
        stat = int(info["size"]), version_of(info)
        self._stats[url] = stat
        return stat

    def read_range(self, url: str, offset: int, size: int,
                   stat: tuple[int, int] | None = None) -> np.ndarray:
        """`size` bytes of `url` from `offset` (uint8), of the version `stat` (the (size,
        version) a listing gave) or this store's own stat recorded (ObjectChanged
        otherwise); EOFError, naming the object and the range, when the range passes its
        size or the server returns fewer bytes. With `stat`, no stat is asked (readers of
        many small ranges: cube windows, members of shards)."""
        url, version, total = self._checked(url, offset, size, stat)
        if size == 0:
            return np.zeros(0, np.uint8)
        fetch = self._fetcher(url, version, total)
        if self.cache is not None:  # an object without validators is never cached
            return self.cache.read(url, None if version == NO_VERSION else version, total,
                                   offset, size, fetch)
        return np.frombuffer(fetch(offset, offset + size), np.uint8).copy()

    def read_pieces(self, url: str, offset: int, size: int,
                    stat: tuple[int, int] | None = None) -> list[tuple[int, np.ndarray]]:
        """The bytes `read_range` returns, as (first byte, read-only uint8 array) pieces in
        order: with a block cache, views of its mapped blocks (nothing copied; a reader
        that takes a few small parts of a long range reads only those), else one piece."""
        url, version, total = self._checked(url, offset, size, stat)
        if size == 0 or self.cache is None:
            return [(offset, self.read_range(url, offset, size, stat))]
        return self.cache.pieces(url, None if version == NO_VERSION else version, total,
                                 offset, size, self._fetcher(url, version, total))

    def pieces_reader(self, url: str, stat: tuple[int, int]
                      ) -> Callable[[int, int], list[tuple[int, np.ndarray]]]:
        """`read_pieces` of the object listed with `stat`, bound once: `(offset, size) ->
        pieces` for a caller that has checked the range is inside the object (readers of
        many small ranges of one object, cube windows)."""
        total, version = int(stat[0]), int(stat[1])
        if self.cache is None or version == NO_VERSION:
            return lambda offset, size: self.read_pieces(url, offset, size, stat)
        return partial(self.cache.pieces, url, version, total,
                       fetch=self._fetcher(url, version, total))

    def _fetcher(self, url: str, version: int, total: int) -> Callable[[int, int], bytes]:
        """`_fetch_exact` of one object version (made once per object: reads of many small
        ranges make none)."""
        key = (url, version, total)
        fetch = self._fetchers.get(key)
        if fetch is None:
            if len(self._fetchers) >= 1 << 12:
                self._fetchers.clear()
            fetch = self._fetchers[key] = partial(self._fetch_exact, url, version, total)
        return fetch

    @property
    def piece_size(self) -> int:
        """Bytes of the pieces `read_pieces` hands out without copying (the cache's blocks;
        0 without a cache)."""
        return self.cache.block_size if self.cache is not None else 0

    def _checked(self, url: str, offset: int, size: int, stat: tuple[int, int] | None
                 ) -> tuple[str, int, int]:
        """(url, version, size) of a range read: EOFError when the range is not inside."""
        total, version = (int(stat[0]), int(stat[1])) if stat is not None else self.stat(url)
        if offset < 0 or size < 0 or offset + size > total:
            raise EOFError(f"{url}: bytes {offset}..{offset + size} requested, the object "
                           f"has {total}")
        return url, version, total

    def _fetch_exact(self, url: str, version: int, total: int, start: int, end: int) -> bytes:
        """Bytes start..end of the object, exactly (the whole object's answer cut; EOFError
        when fewer come)."""
        data = self._fetch(url, start, end, version, total)
        if len(data) == total != end - start:  # Range ignored: the whole object came
            warnings.warn(f"{url}: the server ignores byte ranges and sends the whole "
                          f"object ({total} bytes) for each read; reads stay correct "
                          "but cost the whole object", stacklevel=2)
            data = data[start:end]
        if len(data) != end - start:
            raise EOFError(f"{url}: bytes {start}..{end} requested, got {len(data)} "
                           f"(the object changed since it was listed with {total} bytes)")
        return data

    def open(self, url: str):
        """A read-only, seekable file object over the object (for walking a shard's tar
        headers once), reading through `read_range` in 64 KiB chunks: each request bounded
        as a whole, its answer checked and its version compared, as every read is."""
        size, version = self.stat(url)
        return ObjectBytes(self, url, size, stat=(size, version)).open()

    def glob(self, pattern: str) -> list[str]:
        """URLs matching `pattern`, sorted."""
        protocol = pattern.split("://", 1)[0]
        found = self._call(pattern, "list", lambda fs, path: fs.glob(path))
        return sorted(p if "://" in p else f"{protocol}://{p}" for p in found)

    def list(self, url: str) -> list[Entry]:
        """(URL, size, version) of every object under the folder `url`, at any depth, in
        sorted order, from one listing call (`fs.find` with details: no stat per object).

        ValueError for http(s) URLs (a web server's folders cannot be listed reliably);
        StoreError, naming the URL, when the listing fails (403, unreachable, ...).
        """
        protocol = url.split("://", 1)[0]
        if protocol in ("http", "https"):
            raise ValueError(f"{url}: folders behind {protocol}:// cannot be listed; use "
                             "WebDataset shards (a .tar URL, a brace pattern or a list; "
                             "`python -m dali_pipes.pack` writes them) or a store that lists "
                             "its objects (s3://, gs://, ...)")
        found = self._call(url, "list", lambda fs, path: fs.find(path, detail=True))
        out = []
        for path, info in found.items():
            if info.get("type", "file") != "file":
                continue
            full = path if "://" in path else f"{protocol}://{path.lstrip('/')}"
            out.append(Entry(full, int(info["size"]), version_of(info)))
        return sorted(out)

    def _fetch(self, url: str, start: int, end: int, version: int, total: int) -> bytes:
        protocol = url.split("://", 1)[0]
        return self._call(url, f"read of bytes {start}..{end}",
                          lambda fs, path: get_range(fs, protocol, url, path, start, end,
                                                     version, total))

    def _call(self, url: str, what: str, work: Callable[[Any, str], Any]) -> Any:
        fs, path = self._filesystem(url)
        for attempt in range(self.retries + 1):
            try:
                return work(fs, path)
            except (ObjectChanged, RangeMismatch):  # the answer is wrong, not failed
                raise
            except Exception as exc:
                if not transient(exc) or attempt == self.retries:
                    raise store_error(url, what, exc, attempt + 1) from exc
            time.sleep(self.backoff * 2 ** attempt)
        raise AssertionError("unreachable")

    def _filesystem(self, url: str):
        import fsspec
        protocol = url.split("://", 1)[0]
        if self._fs.get("pid") != os.getpid():  # forked: the parent's clients are not ours
            self._fs = {"pid": os.getpid()}
        if protocol not in self._fs:
            options = _with_timeouts(protocol, self.storage_options, self.timeout)
            fs = fsspec.filesystem(protocol, **options)
            if protocol in ("s3", "s3a"):
                fs.retries = 1  # s3fs's own retries off: ours count
            self._fs[protocol] = BoundedFileSystem(fs, self.timeout)
        fs = self._fs[protocol]
        return fs, (url if protocol in ("http", "https") else fs._strip_protocol(url))


def _with_timeouts(protocol: str, options: dict, timeout: float) -> dict:
    """Storage options with the clients' own timeouts (each connection and socket read; the
    whole request is bounded by `BoundedFileSystem`), fsspec's retries off (ours count) and
    no listings cache (a stat after a listing must see the object as it is now)."""
    out = dict(options)
    out.setdefault("use_listings_cache", False)
    if protocol in ("s3", "s3a"):
        config = dict(out.get("config_kwargs") or {})
        config.setdefault("connect_timeout", timeout)
        config.setdefault("read_timeout", timeout)
        config.setdefault("retries", {"max_attempts": 1})
        out["config_kwargs"] = config
    elif protocol in ("http", "https"):
        import aiohttp
        client = dict(out.get("client_kwargs") or {})
        # per step, as botocore's: the whole request is ours to bound (one error, always)
        client.setdefault("timeout", aiohttp.ClientTimeout(connect=timeout,
                                                           sock_read=timeout))
        out["client_kwargs"] = client
    return out
