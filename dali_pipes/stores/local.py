"""The local-file store: whole files and byte ranges of files on a local file system."""
from __future__ import annotations

import os

import numpy as np


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
    """Bytes of local files. Stateless (no open handles), so forked workers share it."""

    def stat(self, path: str) -> tuple[int, int]:
        """(size in bytes, mtime in ns) of `path`; FileNotFoundError names it."""
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns

    def open(self, path: str):
        """`path` opened for reading (binary)."""
        return open(path, "rb")

    def read_range(self, path: str, offset: int, size: int) -> np.ndarray:
        """`size` bytes of `path` from `offset` as a uint8 array.

        Args:
            path: a local file.
            offset: the first byte.
            size: how many bytes.

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
            got = _pread_into(fd, data, offset)
        finally:
            os.close(fd)
        if got != size:
            raise EOFError(f"{path}: bytes {offset}..{offset + size} requested, the file "
                           f"ends after {offset + got} (truncated or changed)")
        return data
