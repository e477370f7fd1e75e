"""ENVI cubes and SPE files read through byte ranges (objects behind URLs), numpy only.

The readers take a `read(offset, size) -> uint8 array` of their data object and ask it only
for the bytes a window needs: per value of the layout's outermost axis, one contiguous run
from the window's first to its last element (ENVI BSQ: one run per band; BIL and BIP: one per
line; SPE: one per frame, the window's rows of it). Headers are validated by the same
functions as local files (`parse_envi_header`, `parse_spe_header`, `spe_layout`); a read that
comes back short raises FormatError naming the object and the byte range.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dali_pipes.formats._mapped import check_index
from dali_pipes.formats.envi import _LAYOUTS, ENVI_DTYPES, EnviHeader
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.spe import SpeHeader, SpeLayout

ReadRange = Callable[[int, int], np.ndarray]


def _checked(read: ReadRange, name: str, offset: int, size: int) -> np.ndarray:
    """`size` bytes of `name` from `offset`; FormatError naming both when fewer come back."""
    try:
        data = read(offset, size)
    except EOFError as exc:
        raise FormatError(name, "byte range", f"bytes {offset}..{offset + size} came back "
                          f"short ({exc})") from exc
    if len(data) != size:
        raise FormatError(name, "byte range", f"bytes {offset}..{offset + size} came back "
                          "short", value=f"{len(data)} bytes", expected=f"{size} bytes")
    return data


def _indices(name: str, index, size: int) -> np.ndarray:
    if isinstance(index, slice):
        return np.arange(size)[index]
    return np.asarray([check_index(name, v, size) for v in index], np.int64)


def read_runs(read: ReadRange, name: str, base: int, shape: tuple[int, int, int],
              wanted: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Elements `wanted[0] x wanted[1] x wanted[2]` (index arrays per axis) of a C-ordered
    `shape` array of `dtype` stored from byte `base`.

    Per value of axis 0 the window is one run, from its first element to its last; runs of
    neighbouring values are joined into one read when the gap between them is no longer
    than the runs themselves (BIL: a window's lines follow each other closely), so a read
    fetches at most about twice the bytes of its runs. Returns (len0, len1, len2) in `dtype`.
    """
    item, slab = dtype.itemsize, shape[1] * shape[2]
    inner = np.asarray(wanted[1])[:, None] * shape[2] + np.asarray(wanted[2])[None, :]
    lo, hi = int(inner.min()), int(inner.max())
    outer = np.asarray(wanted[0], np.int64)
    out = np.empty((len(outer), *inner.shape), dtype)
    order = np.argsort(outer, kind="stable")
    for group in _spans(outer[order], slab, hi - lo + 1):
        chosen = order[group]
        first = int(outer[chosen[0]]) * slab + lo
        last = int(outer[chosen[-1]]) * slab + hi
        run = _checked(read, name, base + first * item, (last - first + 1) * item)
        values = np.frombuffer(run, dtype)
        out[chosen] = values[outer[chosen][:, None, None] * slab + inner[None] - first]
    return out


def _spans(sorted_outer: np.ndarray, slab: int, run: int) -> list[np.ndarray]:
    """Positions of `sorted_outer` grouped into reads: a new read where the gap to the
    previous run is longer than a run."""
    gaps = np.diff(sorted_outer) * slab - run
    cuts = np.flatnonzero(gaps > run) + 1
    return np.split(np.arange(len(sorted_outer)), cuts)


class RangedEnviCube:
    """An ENVI cube whose data object is read in byte ranges (the `Cube` protocol)."""

    def __init__(self, path: str, data_path: str, header: EnviHeader, read: ReadRange):
        self.path, self.data_path, self.header, self._read = path, data_path, header, read
        self._axes, self._to_bsq = _LAYOUTS[header.interleave]

    geometry = property(lambda self: (self.header.bands, self.header.lines,
                                      self.header.samples))
    dtype = property(lambda self: ENVI_DTYPES[self.header.data_type])
    wavelengths = property(lambda self: self.header.wavelength)
    files = property(lambda self: (self.path, self.data_path))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """(n_bands, h, w) window at line `y`, sample `x` (the `Cube` protocol)."""
        hd = self.header
        _check_window(y, x, h, w, hd.lines, hd.samples)
        wanted = {"bands": _indices("bands", slice(None) if bands is None else bands,
                                    hd.bands),
                  "lines": np.arange(y, y + h), "samples": np.arange(x, x + w)}
        if not len(wanted["bands"]):
            raise ValueError("bands must not be empty")
        shape = tuple(getattr(hd, a) for a in self._axes)
        values = read_runs(self._read, self.data_path, hd.header_offset, shape,
                           [wanted[a] for a in self._axes], hd.dtype)
        return np.array(values.transpose(self._to_bsq), dtype=self.dtype, order="C")

    def close(self) -> None:
        """Nothing to release: reads are stateless."""


class RangedSpeFile:
    """An SPE file read in byte ranges (the `Cube` protocol: bands are x, lines frames,
    samples y)."""

    def __init__(self, path: str, header: SpeHeader, layout: SpeLayout, read: ReadRange):
        self.path, self.header, self.layout, self._read = path, header, layout, read

    geometry = property(lambda self: (self.layout.xdim, self.layout.frames, self.layout.ydim))
    dtype = property(lambda self: self.layout.dtype.newbyteorder("="))
    wavelengths = property(lambda self: self.layout.wavelengths)
    files = property(lambda self: (self.path,))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """Frames `y:y+h`, y-rows `x:x+w`, x columns `bands` as (n_bands, h, w)."""
        lay = self.layout
        _check_window(y, x, h, w, lay.frames, lay.ydim)
        columns = _indices("bands", slice(None) if bands is None else bands, lay.xdim)
        if not len(columns):
            raise ValueError("bands must not be empty")
        row_bytes = lay.xdim * lay.dtype.itemsize
        out = np.empty((h, w, len(columns)), self.dtype)
        for k in range(h):
            start = lay.data_offset + (y + k) * lay.frame_stride + x * row_bytes
            run = _checked(self._read, self.path, start, w * row_bytes)
            out[k] = run.view(lay.dtype).reshape(w, lay.xdim)[:, columns]
        return np.ascontiguousarray(out.transpose(2, 0, 1))

    def close(self) -> None:
        """Nothing to release: reads are stateless."""


def _check_window(y: int, x: int, h: int, w: int, lines: int, samples: int) -> None:
    for name, size in (("h", h), ("w", w)):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive int, got {size!r}")
    check_index("y", y, lines)
    check_index("x", x, samples)
    if y + h > lines or x + w > samples:
        raise IndexError(f"window y={y}, x={x}, h={h}, w={w} exceeds (lines, samples)="
                         f"({lines}, {samples})")


__all__ = ["RangedEnviCube", "RangedSpeFile", "read_runs"]
