"""ENVI cubes and SPE files read through byte ranges (objects behind URLs), numpy only.

The readers take a `read(offset, size) -> uint8 array` of their data object and ask it only
for the bytes a window needs (`dali_pipes.formats.byte_runs`): per value of the layout's
outermost axis, one contiguous run from the window's first to its last element (ENVI BSQ:
one run per band; BIL and BIP: one per line; SPE: one per frame, the window's rows of it),
neighbouring runs joined into one read. Where the reader also has `pieces(offset, size)`
(an object behind a block cache: views of its mapped blocks), a read costs no copy and the
window is taken out of the bytes as out of a memory map. Each window shape's geometry is
worked out once per cube. Headers are validated by the same functions as local files
(`parse_envi_header`, `parse_spe_header`, `spe_layout`); a read that comes back short raises
FormatError naming the object and the byte range.
"""
from __future__ import annotations

import numpy as np

from dali_pipes.formats._mapped import check_index
from dali_pipes.formats.byte_runs import ReadRange, Selection, Window, count, first, read_runs
from dali_pipes.formats.envi import _LAYOUTS, ENVI_DTYPES, EnviHeader
from dali_pipes.formats.spe import SpeHeader, SpeLayout

WINDOW_SHAPES = 64  # window geometries kept per cube


def _indices(name: str, index, size: int) -> np.ndarray:
    if isinstance(index, slice):
        return np.arange(size)[index]
    return np.asarray([check_index(name, v, size) for v in index], np.int64)


def _selection(index: np.ndarray) -> Selection:
    """`index` as a slice where it is a contiguous ascending range (read as a view)."""
    lo = int(index[0])
    if int(index[-1]) - lo + 1 == len(index) and np.all(np.diff(index) == 1):
        return slice(lo, lo + len(index))
    return index


class _Shapes(dict):
    """The `Window` of each window shape (bands, lines, samples) a cube has been asked for,
    made once: the geometry of a window is the same wherever it lies."""

    def keep(self, key: tuple, window: Window) -> Window:
        if len(self) >= WINDOW_SHAPES:
            self.clear()
        self[key] = window
        return window


class RangedEnviCube:
    """An ENVI cube whose data object is read in byte ranges (the `Cube` protocol)."""

    def __init__(self, path: str, data_path: str, header: EnviHeader, read: ReadRange):
        self.path, self.data_path, self.header, self._read = path, data_path, header, read
        axes, to_bsq = _LAYOUTS[header.interleave]
        self._from_bsq = tuple(int(a) for a in np.argsort(to_bsq))  # (band, y, x) -> file
        self._file_axes = tuple(("bands", "lines", "samples").index(a) for a in axes)
        self._shape = tuple(getattr(header, a) for a in axes)
        self._band_sels: dict[tuple, Selection] = {}
        self._shapes = _Shapes()

    geometry = property(lambda self: (self.header.bands, self.header.lines,
                                      self.header.samples))
    dtype = property(lambda self: ENVI_DTYPES[self.header.data_type])
    wavelengths = property(lambda self: self.header.wavelength)
    files = property(lambda self: (self.path, self.data_path))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """(n_bands, h, w) window at line `y`, sample `x` (the `Cube` protocol)."""
        hd = self.header
        _check_window(y, x, h, w, hd.lines, hd.samples)
        chosen = self._bands(bands)
        wanted = (chosen, slice(y, y + h), slice(x, x + w))  # (bands, lines, samples)
        sel = [wanted[a] for a in self._file_axes]
        key = (None if bands is None else id(chosen), h, w)
        window = self._shapes.get(key) or self._shapes.keep(key, Window(
            hd.header_offset, self._shape, hd.dtype, sel[1:], None, self._read))
        out = np.empty((count(chosen), h, w), self.dtype)
        window.read(self._read, self.data_path, sel[0], out.transpose(self._from_bsq),
                    (first(sel[1]), first(sel[2])))
        return out

    def _bands(self, bands) -> Selection:
        """The bands as a selection (checked once per distinct list)."""
        return _band_selection(self._band_sels, bands, self.header.bands)

    def close(self) -> None:
        """Nothing to release: reads are stateless."""


class RangedSpeFile:
    """An SPE file read in byte ranges (the `Cube` protocol: bands are x, lines frames,
    samples y)."""

    def __init__(self, path: str, header: SpeHeader, layout: SpeLayout, read: ReadRange):
        self.path, self.header, self.layout, self._read = path, header, layout, read
        self._band_sels: dict[tuple, Selection] = {}
        self._shapes = _Shapes()

    geometry = property(lambda self: (self.layout.xdim, self.layout.frames, self.layout.ydim))
    dtype = property(lambda self: self.layout.dtype.newbyteorder("="))
    wavelengths = property(lambda self: self.layout.wavelengths)
    files = property(lambda self: (self.path,))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """Frames `y:y+h`, y-rows `x:x+w`, x columns `bands` as (n_bands, h, w)."""
        lay = self.layout
        _check_window(y, x, h, w, lay.frames, lay.ydim)
        columns = self._columns(bands)
        key = (None if bands is None else id(columns), h, w)
        window = self._shapes.get(key) or self._shapes.keep(key, Window(
            lay.data_offset, (lay.frames, lay.ydim, lay.xdim), lay.dtype,
            (slice(x, x + w), columns), lay.frame_stride, self._read))
        out = np.empty((count(columns), h, w), self.dtype)
        window.read(self._read, self.path, slice(y, y + h), out.transpose(1, 2, 0),
                    (x, first(columns)))
        return out

    def _columns(self, bands) -> Selection:
        """The bands (x columns) as a selection (checked once per distinct list)."""
        return _band_selection(self._band_sels, bands, self.layout.xdim)

    def close(self) -> None:
        """Nothing to release: reads are stateless."""


def _band_selection(memo: dict, bands, size: int) -> Selection:
    """`bands` (None: all of `size`) as a selection, checked once per distinct list."""
    if bands is None:
        return slice(0, size)
    key = tuple(bands)
    sel = memo.get(key)
    if sel is None:
        index = _indices("bands", bands, size)
        if not len(index):
            raise ValueError("bands must not be empty")
        sel = memo[key] = _selection(index)
    return sel


def _check_window(y: int, x: int, h: int, w: int, lines: int, samples: int) -> None:
    for name, size in (("h", h), ("w", w)):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    check_index("y", y, lines)
    check_index("x", x, samples)
    if y + h > lines or x + w > samples:
        raise IndexError(f"window y={y}, x={x}, h={h}, w={w} exceeds (lines, samples)="
                         f"({lines}, {samples})")


__all__ = ["RangedEnviCube", "RangedSpeFile", "read_runs"]  # read_runs: byte_runs.py
