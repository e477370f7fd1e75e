"""ENVI cubes and SPE files read through byte ranges (objects behind URLs), numpy only.

The readers take a `read(offset, size) -> uint8 array` of their data object and ask it only
for the bytes a window needs: per value of the layout's outermost axis, one contiguous run
from the window's first to its last element (ENVI BSQ: one run per band; BIL and BIP: one per
line; SPE: one per frame, the window's rows of it), neighbouring runs joined into one read.
Where the reader also has `pieces(offset, size)` (an object behind a block cache: views of
its mapped blocks), a read costs no copy, and the window is taken out of the bytes as out
of a memory map: only its own elements are copied. Headers are validated by the same
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
Piece = tuple[int, np.ndarray]  # (first byte, bytes)
Selection = slice | np.ndarray  # a contiguous range, or indices


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


def _pieces(read: ReadRange, name: str, offset: int, size: int) -> list[Piece]:
    """The range as (first byte, bytes) pieces: `read.pieces` where the reader has it (views
    of cached blocks), else one piece; FormatError naming the range when it comes back short."""
    pieces = getattr(read, "pieces", None)
    if pieces is None:
        return [(offset, _checked(read, name, offset, size))]
    try:
        got = pieces(offset, size)
    except EOFError as exc:
        raise FormatError(name, "byte range", f"bytes {offset}..{offset + size} came back "
                          f"short ({exc})") from exc
    found = len(got[0][1]) if len(got) == 1 else sum(len(p) for _, p in got)
    if found != size:
        raise FormatError(name, "byte range", f"bytes {offset}..{offset + size} came back "
                          "short", value=f"{found} bytes", expected=f"{size} bytes")
    return got


def _indices(name: str, index, size: int) -> np.ndarray:
    if isinstance(index, slice):
        return np.arange(size)[index]
    return np.asarray([check_index(name, v, size) for v in index], np.int64)


def _selection(index: np.ndarray) -> Selection:
    """`index` as a slice where it is a contiguous ascending range (read as a view)."""
    first = int(index[0])
    if int(index[-1]) - first + 1 == len(index) and np.all(np.diff(index) == 1):
        return slice(first, first + len(index))
    return index


def _count(sel: Selection) -> int:
    return sel.stop - sel.start if isinstance(sel, slice) else len(sel)


def _bounds(sel: Selection) -> tuple[int, int]:
    """First and last index a selection touches."""
    if isinstance(sel, slice):
        return sel.start, sel.stop - 1
    return int(sel.min()), int(sel.max())


def read_runs(read: ReadRange, name: str, base: int, shape: tuple[int, int, int],
              sel: Sequence[Selection], dtype: np.dtype, stride: int | None = None,
              out: np.ndarray | None = None) -> np.ndarray:
    """Elements `sel[0] x sel[1] x sel[2]` of a `shape` array of `dtype` stored from byte
    `base`, C-ordered but for `stride`, the bytes from one value of axis 0 to the next
    (None: C order); each selection a slice (a contiguous range) or an index array (one
    axis at most). Returns (n0, n1, n2): written into `out` when given (any layout, any
    dtype the values cast to), else in `dtype`, possibly a view of the bytes read (copy
    it to keep it).

    Per value of axis 0 the window is one run, from its first element to its last; runs of
    neighbouring values are joined into one read when the gap between them is no longer
    than the runs themselves (BIL: a window's lines follow each other closely), so a read
    fetches at most about twice the bytes of its runs. A reader with `pieces` (cached
    blocks, mapped) hands its bytes out without copying: its runs are joined across any gap
    shorter than its `piece_size` (which skips no block), and only the window's elements
    are copied out of the strided view of them, as from a memory map.
    """
    item = dtype.itemsize
    (lo1, hi1), (lo2, hi2) = _bounds(sel[1]), _bounds(sel[2])
    window = _Window(base, stride or shape[1] * shape[2] * item, shape[2] * item, dtype,
                     lo1 * shape[2] * item + lo2 * item, (hi1 - lo1 + 1, hi2 - lo2 + 1))
    inner = tuple(slice(None) if isinstance(s, slice) else s - lo
                  for s, lo in ((sel[1], lo1), (sel[2], lo2)))
    gap = max(window.run, getattr(read, "piece_size", 0) if hasattr(read, "pieces") else 0)
    parts = None
    if isinstance(sel[0], slice):
        first, count = sel[0].start, sel[0].stop - sel[0].start
        if count == 1 or window.stride - window.run <= gap:  # one read: the common case
            start = window.start(first)
            parts = _pieces(read, name, start, (count - 1) * window.stride + window.run)
            if len(parts) == 1:
                values = window.view(parts[0][1], parts[0][0], first, count)[
                    (slice(None),) + inner]
                if out is None:
                    return values
                out[...] = values
                return out
            if out is None:
                out = np.empty((count, _count(sel[1]), _count(sel[2])), dtype)
            return _rows_from_pieces(window, parts, first, count, inner, out)
        rows, order = np.arange(first, first + count, dtype=np.int64), None
    else:
        order = np.argsort(sel[0], kind="stable")
        rows = np.asarray(sel[0], np.int64)[order]
    groups = _spans(rows, window.stride, window.run, gap, order is None)
    for group in groups:
        for sub, data, at in _buffers(read, name, window, rows[group], parts):
            values = window.take(data, at, rows[group][sub], inner)
            if out is None:
                out = np.empty((len(rows),) + values.shape[1:], dtype)
            if order is None and isinstance(group, slice):
                out[group][sub] = values  # a view of `out`
            else:  # rows were sorted: back to where they were asked
                out[(order if order is not None else np.arange(len(rows)))[group][sub]] = \
                    values
    assert out is not None
    return out


class _Window:
    """Where a window lies in the object: per row (value of axis 0) one run of `run` bytes
    from byte `lo` of the row, rows `stride` bytes apart from byte `base`."""

    def __init__(self, base: int, stride: int, row: int, dtype: np.dtype, lo: int,
                 box: tuple[int, int]):
        self.base, self.stride, self.row, self.dtype = base, stride, row, dtype
        self.lo, self.box = lo, box
        self.run = (box[0] - 1) * row + box[1] * dtype.itemsize

    def start(self, row: int) -> int:
        """The first byte of `row`'s run."""
        return self.base + row * self.stride + self.lo

    def view(self, data: np.ndarray, at: int, first: int, count: int) -> np.ndarray:
        """Rows `first`.. `first + count` of the window's box, viewed in `data`, the
        object's bytes from byte `at` (holding every byte of those rows' runs)."""
        return np.ndarray((count,) + self.box, self.dtype, buffer=data,
                          offset=self.start(first) - at,
                          strides=(self.stride, self.row, self.dtype.itemsize))

    def take(self, data: np.ndarray, at: int, rows: np.ndarray, inner: tuple) -> np.ndarray:
        """Rows `rows` (ascending) of the window in `data` (as `view`); `inner`: what of
        each run."""
        first = int(rows[0])
        count = int(rows[-1]) - first + 1
        outer = slice(None) if count == len(rows) else rows - first
        return self.view(data, at, first, count)[(outer,) + inner]


def _rows_from_pieces(window: _Window, parts: list[Piece], first: int, count: int,
                      inner: tuple, out: np.ndarray) -> np.ndarray:
    """Rows `first`.. `first + count` of the window into `out`, from the pieces of one
    read: the rows inside each piece as one view of it, a row crossing pieces from a copy
    of its own run."""
    i, run = 0, window.run
    for at, data in parts:  # rows and their runs ascending: one pass
        end = at + len(data)
        j = i
        while j < count and window.start(first + j) + run <= end:
            j += 1
        if j > i:
            out[i:j] = window.view(data, at, first + i, j - i)[(slice(None),) + inner]
            i = j
        while i < count and window.start(first + i) < end:  # its run goes on in the next
            a = window.start(first + i)
            own = np.concatenate([d[max(a - p, 0):a + run - p] for p, d in parts
                                  if p < a + run and p + len(d) > a])
            out[i:i + 1] = window.view(own, a, first + i, 1)[(slice(None),) + inner]
            i += 1
    return out


def _buffers(read: ReadRange, name: str, window: _Window, rows: np.ndarray,
             parts: list[Piece] | None = None) -> list[tuple[slice, np.ndarray, int]]:
    """The bytes of the runs of `rows` (ascending), read as one range (unless `parts` holds
    it already): (which rows, bytes, first byte of the bytes). A range that came in several
    pieces (cached blocks) gives the rows whose runs lie inside each piece with the piece,
    and each row whose run crosses pieces with a copy of its own bytes."""
    if parts is None:
        start = window.start(int(rows[0]))
        parts = _pieces(read, name, start, window.start(int(rows[-1])) + window.run - start)
    if len(parts) == 1:
        return [(slice(None), parts[0][1], parts[0][0])]
    run, starts = window.run, [window.start(r) for r in rows.tolist()]
    out: list[tuple[slice, np.ndarray, int]] = []
    i, n = 0, len(starts)
    for at, data in parts:  # rows and their runs ascending: one pass
        first, end = i, at + len(data)
        while i < n and starts[i] + run <= end:
            i += 1
        if i > first:
            out.append((slice(first, i), data, at))
        while i < n and starts[i] < end:  # a run crossing into the next piece
            a, b = starts[i], starts[i] + run
            own = np.concatenate([d[max(a - p, 0):b - p] for p, d in parts
                                  if p < b and p + len(d) > a])
            out.append((slice(i, i + 1), own, a))
            i += 1
    return out


def _spans(rows: np.ndarray, stride: int, run: int, gap: int, contiguous: bool) -> list:
    """Positions of `rows` (ascending; runs of `run` bytes, rows `stride` bytes apart)
    grouped into reads: a new read where more than `gap` bytes lie between two runs.
    Slices for `contiguous` rows (one read, or one each)."""
    if contiguous:
        if len(rows) == 1 or stride - run <= gap:
            return [slice(None)]
        return [slice(i, i + 1) for i in range(len(rows))]
    cuts = np.flatnonzero(np.diff(rows) * stride - run > gap) + 1
    return np.split(np.arange(len(rows)), cuts)


class RangedEnviCube:
    """An ENVI cube whose data object is read in byte ranges (the `Cube` protocol)."""

    def __init__(self, path: str, data_path: str, header: EnviHeader, read: ReadRange):
        self.path, self.data_path, self.header, self._read = path, data_path, header, read
        self._axes, to_bsq = _LAYOUTS[header.interleave]
        self._from_bsq = tuple(int(a) for a in np.argsort(to_bsq))  # (band, y, x) -> file
        self._shape = tuple(getattr(header, a) for a in self._axes)
        self._band_sels: dict[tuple, Selection] = {}

    geometry = property(lambda self: (self.header.bands, self.header.lines,
                                      self.header.samples))
    dtype = property(lambda self: ENVI_DTYPES[self.header.data_type])
    wavelengths = property(lambda self: self.header.wavelength)
    files = property(lambda self: (self.path, self.data_path))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """(n_bands, h, w) window at line `y`, sample `x` (the `Cube` protocol)."""
        hd = self.header
        _check_window(y, x, h, w, hd.lines, hd.samples)
        wanted = {"bands": self._bands(bands), "lines": slice(y, y + h),
                  "samples": slice(x, x + w)}
        sel = [wanted[a] for a in self._axes]
        out = np.empty(tuple(_count(wanted[a]) for a in ("bands", "lines", "samples")),
                       self.dtype)
        read_runs(self._read, self.data_path, hd.header_offset, self._shape, sel, hd.dtype,
                  out=out.transpose(self._from_bsq))
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

    geometry = property(lambda self: (self.layout.xdim, self.layout.frames, self.layout.ydim))
    dtype = property(lambda self: self.layout.dtype.newbyteorder("="))
    wavelengths = property(lambda self: self.layout.wavelengths)
    files = property(lambda self: (self.path,))

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """Frames `y:y+h`, y-rows `x:x+w`, x columns `bands` as (n_bands, h, w)."""
        lay = self.layout
        _check_window(y, x, h, w, lay.frames, lay.ydim)
        columns = self._columns(bands)
        out = np.empty((_count(columns), h, w), self.dtype)
        read_runs(self._read, self.path, lay.data_offset, (lay.frames, lay.ydim, lay.xdim),
                  (slice(y, y + h), slice(x, x + w), columns), lay.dtype,
                  stride=lay.frame_stride, out=out.transpose(1, 2, 0))
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


__all__ = ["RangedEnviCube", "RangedSpeFile", "read_runs"]
