"""The one interface every hyperspectral scene reader offers (ENVI cubes, SPE files).

Callers (the hyperspectral source, band selection) address a scene as (band, line, sample)
through `geometry` and `read_window` and never ask which reader they hold. An ENVI cube's
geometry is its shape; an SPE file's (frames, ydim, xdim) is (xdim, frames, ydim): bands are
the x axis, lines the frames, samples the y axis.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Cube(Protocol):
    """A validated, open scene."""

    path: str

    @property
    def geometry(self) -> tuple[int, int, int]:
        """(bands, lines, samples)."""
        ...

    @property
    def files(self) -> tuple[str, ...]:
        """Every file the scene's data comes from (header first)."""
        ...

    @property
    def dtype(self) -> np.dtype:
        """Native-endian dtype of what reads return."""
        ...

    @property
    def wavelengths(self) -> np.ndarray | None:
        """float64 (bands,) in nm, or None."""
        ...

    def read_window(self, y: int, x: int, h: int, w: int,
                    bands: Sequence[int] | None = None) -> np.ndarray:
        """(n_bands, h, w) in-bounds window starting at line `y`, sample `x`.

        Args:
            y, x: first line and sample; h, w: window size (positive, in bounds).
            bands: band indices, or None for all.

        Returns:
            An independent native-endian array in (band, line, sample) order.
        """
        ...

    def close(self) -> None: ...
