"""Each listed file's size and modification time, taken at listing or on first use.

A local listing reads directories only (names and entry types, which `os.scandir` gives
without a `stat` per file); the per-file `(size, mtime_ns)` that the listing digest and the
loader's byte counts need are taken the first time something asks for them (`FileStats.get`:
the first `state_dict()` / `load_state_dict()`, `loader.stats()`, a pack plan), by a pool
of threads (`os.stat` releases the GIL, so on a network file system the calls overlap),
once per process. With `file_stats="listing"` they are taken during the listing instead,
as every listing did before. The digests of both modes are equal for the same files, so a
state saved under one loads under the other. A file that cannot be stat'ed on first use
(removed since the listing) gets size and time -1: its digest differs from one taken while
it existed, and reading it fails under `on_error`.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dali_pipes.sources.names import PathTable

FILE_STATS = ("lazy", "listing")
_CHUNK = 4096  # files per stat task


def check_file_stats(mode: str) -> str:
    """`mode` validated: "lazy" (stat each file on first use) or "listing" (while listing)."""
    if mode not in FILE_STATS:
        raise ValueError(f"file_stats must be one of {FILE_STATS}, got {mode!r}")
    return mode


class FileStats:
    """(sizes, mtimes_ns) of a listing's files: given, or taken on the first `get()`."""

    def __init__(self, files: Sequence[str] | None = None, sizes: np.ndarray | None = None,
                 mtimes_ns: np.ndarray | None = None, workers: int | None = None):
        self._files = files
        self._taken = None if sizes is None or mtimes_ns is None else (
            np.asarray(sizes, np.int64), np.asarray(mtimes_ns, np.int64))
        self.workers = workers or min(16, 4 * (os.cpu_count() or 1))
        self._lock = threading.Lock()

    @property
    def taken(self) -> bool:
        """Whether the stats exist already (given at listing, or taken by a `get()`)."""
        return self._taken is not None

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        """(sizes, mtimes_ns), int64, one each per file; the first call stats every file."""
        with self._lock:
            if self._taken is None:
                self._taken = stat_files(self._files or (), self.workers)
            return self._taken

    def sizes_of(self, indices: np.ndarray) -> np.ndarray:
        """int64 sizes of the files `indices` (-1 for one that cannot be stat'ed): from
        the stats when taken, else by one stat each, leaving the others untaken."""
        if self._taken is not None:
            return self._taken[0][indices]
        files = self._files or ()
        return stat_files([files[int(i)] for i in np.asarray(indices).tolist()], 1)[0]

    def __getstate__(self) -> dict:
        return {"files": self._files, "taken": self._taken, "workers": self.workers}

    def __setstate__(self, state: dict) -> None:
        self._files, self._taken = state["files"], state["taken"]
        self.workers, self._lock = state["workers"], threading.Lock()


def stat_files(files: Sequence[str], workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, mtimes_ns) of `files` (following symlinks, as the listing does), -1 for a
    file that cannot be stat'ed, taken in chunks by `workers` threads."""
    n = len(files)
    sizes, mtimes = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    chunks = [(lo, min(lo + _CHUNK, n)) for lo in range(0, n, _CHUNK)]
    if len(chunks) <= 1 or workers <= 1:
        for lo, hi in chunks:
            _stat_chunk(files, lo, hi, sizes, mtimes)
        return sizes, mtimes
    with ThreadPoolExecutor(min(workers, len(chunks))) as pool:
        list(pool.map(lambda c: _stat_chunk(files, c[0], c[1], sizes, mtimes), chunks))
    return sizes, mtimes


def _stat_chunk(files: Sequence[str], lo: int, hi: int, sizes: np.ndarray,
                mtimes: np.ndarray) -> None:
    paths = files.raw_chunk(lo, hi) if isinstance(files, PathTable) else \
        [os.fsencode(p) for p in files[lo:hi]]
    out_s, out_t = [], []
    stat = os.stat
    for path in paths:
        try:
            st = stat(path)
        except OSError:
            out_s.append(-1)
            out_t.append(-1)
            continue
        out_s.append(st.st_size)
        out_t.append(st.st_mtime_ns)
    sizes[lo:hi], mtimes[lo:hi] = out_s, out_t
