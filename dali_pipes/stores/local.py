"""The local-file store: whole files and byte ranges of files on a local file system."""
from __future__ import annotations

import os

import numpy as np


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
        with open(path, "rb") as f:
            f.seek(offset)
            got = f.readinto(data.data)
        if got != size:
            raise EOFError(f"{path}: bytes {offset}..{offset + size} requested, the file "
                           f"ends after {offset + got} (truncated or changed)")
        return data
