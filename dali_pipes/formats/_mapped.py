"""What every memory-mapped reader shares: the map, a size check before each read, closing.

A map outlives changes to its file: when the file is truncated after it was mapped, touching a
page past the new end kills the process with SIGBUS. So every read first asks the map's own
file descriptor for the file's current size (``mmap.size()``: one ``fstat``) and raises
FormatError when the bytes it is about to touch are gone. The check and the read are not
atomic: a file truncated in between still faults, as with any memmap.
"""
from __future__ import annotations

import math
import mmap

import numpy as np

from dali_pipes.formats.errors import FormatError


def check_index(name: str, value, size: int) -> int:
    """`value` as an int in [0, size) (the readers' band, line, frame and column indices).

    Args:
        name: the argument's name, for the error message.
        value: the index given.
        size: the axis length.
    Returns:
        the index as a plain int; TypeError when it is not an integer (bools refused),
        IndexError when it is out of range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value < size:
        raise IndexError(f"{name}={value} out of range [0, {size})")
    return int(value)


class MappedFile:
    """Maps ``data_path`` read-only into ``_mm``; reads return copies, so no view outlives it."""

    data_path: str
    _mm: np.ndarray | None = None
    _map: mmap.mmap | None = None

    def _open_map(self, data_path: str, dtype: np.dtype, offset: int,
                  shape: tuple[int, ...]) -> None:
        """Map bytes ``[0, offset + nbytes)`` of the file and view ``shape`` at ``offset``."""
        self.data_path = data_path
        count = math.prod(shape)
        end = offset + count * np.dtype(dtype).itemsize
        try:
            with open(data_path, "rb") as handle:  # mmap keeps its own duplicate of the fd
                self._map = mmap.mmap(handle.fileno(), end, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:  # ValueError: shorter than `end` since validated
            raise FormatError(data_path, "data size", f"cannot map {end} bytes: {exc}") from exc
        self._mm = np.frombuffer(self._map, dtype, count, offset).reshape(shape)

    def _mapped(self, end: int) -> np.ndarray:
        """The mapped array, once the file is known to still hold its bytes ``[0, end)``."""
        data, mapping = self._mm, self._map
        if data is None or mapping is None:
            raise ValueError(f"{getattr(self, 'path', self.data_path)}: file is closed")
        size = mapping.size()  # fstat on the map's descriptor: the file's size now
        if size < end:
            raise FormatError(self.data_path, "data size",
                              "file was truncated after it was opened; this read needs bytes "
                              "past its end", value=f"{size} bytes", expected=f">= {end} bytes")
        return data

    def close(self) -> None:
        # Dropped, not closed: an array still viewing the map (inside a read) keeps it alive.
        self._mm = self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
