"""The local-file store: whole files and byte ranges of files on a local file system."""
from __future__ import annotations

import os

import numpy as np

from dali_pipes.stores import Entry


def _pread_into(fd: int, data: np.ndarray, offset: int) -> int:
    """Bytes of `fd` from `offset` read into `data` (until it is full or the file ends)."""
    if not hasattr(os, "preadv"):  # a copy where preadv is missing
        got = os.pread(fd, len(data), offset)
        data[:len(got)] = np.frombuffer(got, np.uint8)
        return len(got)
    done = 0
    while done < len(data):
        n = os.preadv(fd, [data[done:].data], offset + done)
        if n == 0:
            break
        done += n
    return done


class LocalStore:
    """Bytes of local files. Stateless (no open handles), so forked workers share it.

    Versions are modification times in ns. `list` walks a folder (symbolic links to
    folders are followed once each: a link back to a folder being walked is not)."""

    supports_listing = True

    def list(self, prefix: str) -> list[Entry]:
        """Every regular file under the folder `prefix`, at any depth, sorted by path, with
        its size and mtime; FileNotFoundError / NotADirectoryError name `prefix`."""
        root = os.fspath(prefix).rstrip("/") or "/"
        if not os.path.isdir(root):
            raise (NotADirectoryError if os.path.exists(root) else FileNotFoundError)(
                f"{root}: no such folder")
        out: list[Entry] = []
        _walk(root, out, {os.path.realpath(root)})
        return sorted(out)

    def stat(self, path: str) -> tuple[int, int]:
        """(size in bytes, mtime in ns) of `path`; FileNotFoundError names it."""
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns

    def open(self, path: str):
        """`path` opened for reading (binary)."""
        return open(path, "rb")

    def read_range(self, path: str, offset: int, size: int,
                   stat: tuple[int, int] | None = None) -> np.ndarray:
        """`size` bytes of `path` from `offset` as a uint8 array.

        Args:
            path: a local file.
            offset: the first byte.
            size: how many bytes.
            stat: the (size, mtime ns) the file was listed with: a file replaced or
                changed since is an OSError naming it (None: not checked).

        Returns:
            A uint8 array of `size` bytes; EOFError, naming the file and the range, when
            the file ends before.
        """
        data = np.empty(size, dtype=np.uint8)
        # One open, one positioned read straight into the array, one close: no file object.
        # O_NONBLOCK: a FIFO put where the shard was fails the read instead of blocking.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
        try:
            if stat is not None:
                _check_unchanged(path, os.fstat(fd), stat)
            got = _pread_into(fd, data, offset)
        finally:
            os.close(fd)
        if got != size:
            raise EOFError(f"{path}: bytes {offset}..{offset + size} requested, the file "
                           f"ends after {offset + got} (truncated or changed)")
        return data


def _check_unchanged(path: str, st: os.stat_result, listed: tuple[int, int]) -> None:
    if (st.st_size, st.st_mtime_ns) != tuple(listed):
        raise OSError(f"{path}: the file changed since it was listed (now {st.st_size} "
                      f"bytes, mtime {st.st_mtime_ns} ns; listed {listed[0]} bytes, mtime "
                      f"{listed[1]} ns); list it again")


def _walk(folder: str, out: list[Entry], seen: set[str]) -> None:
    """Regular files under `folder` into `out`; `seen`: real paths of the folders walked."""
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.is_dir():
                    real = os.path.realpath(entry.path)
                    if real not in seen:
                        seen.add(real)
                        _walk(entry.path, out, seen)
                elif entry.is_file():
                    st = entry.stat()
                    out.append(Entry(entry.path, st.st_size, st.st_mtime_ns))
            except OSError:  # a dangling link, or gone while walked: not an object
                continue
