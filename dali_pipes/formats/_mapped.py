"""What every memory-mapped reader shares: closing, as a method or a context manager."""
from __future__ import annotations


class MappedFile:
    """Holds its memmap in `_mm`. Reads return copies, so no view outlives the mapping."""

    _mm = None

    def close(self) -> None:
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
