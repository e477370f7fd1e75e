"""A window of a 3-D array stored in an object, read through byte ranges (numpy only).

The array is C-ordered but for its outer stride (the bytes from one value of axis 0, a
"row", to the next: an SPE frame holds more than its pixels). Per row the window is one run
of bytes, from its first element to its last; runs of neighbouring rows are joined into one
read when the gap between them is no longer than the runs themselves (BIL: a window's lines
follow each other closely), so a read fetches at most about twice the bytes of its runs. A
reader with `pieces(offset, size)` (an object behind a block cache: read-only views of its
mapped blocks) hands its bytes out without copying; runs are then joined across any gap
shorter than its `piece_size` (which skips no block), and the window is taken out of the
bytes as out of a memory map: a strided view per piece, only its own elements copied. A run
crossing two pieces is copied out of them first. A read that comes back short raises
FormatError naming the object and the byte range.

`Window` is the geometry of one window shape (which bands, how many lines and samples),
made once and used for every window of that shape (`Window.read`, given where it starts).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dali_pipes.formats.errors import FormatError

ReadRange = Callable[[int, int], np.ndarray]
Piece = tuple[int, np.ndarray]  # (first byte, bytes)
Selection = slice | np.ndarray  # a contiguous range, or indices


def checked(read: ReadRange, name: str, offset: int, size: int) -> np.ndarray:
    """`size` bytes of `name` from `offset`; FormatError naming both when fewer come back."""
    try:
        data = read(offset, size)
    except EOFError as exc:
        raise _short(name, offset, size, exc) from exc
    if len(data) != size:
        raise _short(name, offset, size, len(data))
    return data


def _pieces(read: ReadRange, name: str, offset: int, size: int) -> list[Piece]:
    """The range as (first byte, bytes) pieces: `read.pieces` where the reader has it, else
    one piece; FormatError naming the range when it comes back short."""
    pieces = getattr(read, "pieces", None)
    if pieces is None:
        return [(offset, checked(read, name, offset, size))]
    try:
        got = pieces(offset, size)
    except EOFError as exc:
        raise _short(name, offset, size, exc) from exc
    found = len(got[0][1]) if len(got) == 1 else sum(len(p) for _, p in got)
    if found != size:
        raise _short(name, offset, size, found)
    return got


def _short(name: str, offset: int, size: int, got: int | EOFError) -> FormatError:
    """The FormatError of a range that came back short: `got` bytes, or the reader's
    EOFError."""
    what = f"bytes {offset}..{offset + size} came back short"
    if isinstance(got, EOFError):
        return FormatError(name, "byte range", f"{what} ({got})")
    return FormatError(name, "byte range", what, value=f"{got} bytes",
                       expected=f"{size} bytes")


def count(sel: Selection) -> int:
    """How many indices a selection holds."""
    return sel.stop - sel.start if isinstance(sel, slice) else len(sel)


def first(sel: Selection) -> int:
    """The lowest index a selection holds."""
    return sel.start if isinstance(sel, slice) else int(sel.min())


def _extent(sel: Selection) -> int:
    return count(sel) if isinstance(sel, slice) else int(sel.max()) - int(sel.min()) + 1


class Window:
    """Windows of `inner` (the selections of axes 1 and 2; one index array at most over
    the three axes) of a `shape` array of `dtype` from byte `base`, rows `stride` bytes
    apart (None: C order), read through `read`."""

    def __init__(self, base: int, shape: tuple[int, int, int], dtype: np.dtype,
                 inner: Sequence[Selection], stride: int | None, read: ReadRange):
        item = dtype.itemsize
        self.base, self.dtype, self.row = base, dtype, shape[2] * item
        self.stride = stride or shape[1] * self.row
        self.box = (_extent(inner[0]), _extent(inner[1]))
        self.run = (self.box[0] - 1) * self.row + self.box[1] * item
        self.index = (slice(None),) + tuple(
            slice(None) if isinstance(s, slice) else s - first(s) for s in inner)
        self.strides, self.item = (self.stride, self.row, item), item
        self.whole = all(isinstance(s, slice) for s in inner)  # the box is the window
        self.lo = first(inner[0]) * self.row + first(inner[1]) * item  # of each row
        self.gap = max(self.run, getattr(read, "piece_size", 0)
                       if hasattr(read, "pieces") else 0)
        self.shape = (count(inner[0]), count(inner[1]))

    def start(self, row: int, lo: int) -> int:
        """The first byte of `row`'s run (`lo`: the run's first byte in its row)."""
        return self.base + row * self.stride + lo

    def view(self, data: np.ndarray, at: int, row: int, rows: int, lo: int) -> np.ndarray:
        """`rows` rows from `row` of the window, in `data`: the object's bytes from `at`."""
        box = np.ndarray((rows,) + self.box, self.dtype, buffer=data,
                         offset=self.start(row, lo) - at, strides=self.strides)
        return box if self.whole else box[self.index]

    def read(self, read: ReadRange, name: str, outer: Selection, out: np.ndarray | None,
             firsts: tuple[int, int] | None = None) -> np.ndarray:
        """Rows `outer` of the window whose selections of axes 1 and 2 start at `firsts`
        (None: where the shape's did), into `out` when given (any layout, any dtype the
        values cast to), else in `dtype`, possibly a view of the bytes read."""
        lo = self.lo if firsts is None else firsts[0] * self.row + firsts[1] * self.item
        if isinstance(outer, slice):
            row, rows = outer.start, outer.stop - outer.start
            if rows == 1 or self.stride - self.run <= self.gap:  # one read: the common case
                start = self.start(row, lo)
                parts = _pieces(read, name, start, (rows - 1) * self.stride + self.run)
                if len(parts) == 1:
                    values = self.view(parts[0][1], parts[0][0], row, rows, lo)
                    if out is None:
                        return values
                    out[...] = values
                    return out
                if out is None:
                    out = np.empty((rows,) + self.shape, self.dtype)
                self._fill(out, parts, np.arange(row, row + rows), lo)
                return out
            rows_at, order = np.arange(row, row + rows), None
        else:
            order = np.argsort(outer, kind="stable")
            rows_at = np.asarray(outer, np.int64)[order]
        if out is None:
            out = np.empty((len(rows_at),) + self.shape, self.dtype)
        target = out if order is None else np.empty_like(out)
        for group in _spans(rows_at, self.stride, self.run, self.gap):
            rows = rows_at[group]
            start = self.start(int(rows[0]), lo)
            end = self.start(int(rows[-1]), lo) + self.run
            self._fill(target[group], _pieces(read, name, start, end - start), rows, lo)
        if order is not None:
            out[order] = target  # rows were read sorted: back to where they were asked
        return out

    def _fill(self, out: np.ndarray, parts: list[Piece], rows: np.ndarray, lo: int) -> None:
        """Rows `rows` (ascending) of the window into `out` from the pieces of one read: the
        rows inside a piece as one view of it, a row crossing pieces from its own bytes."""
        starts = [self.start(r, lo) for r in rows.tolist()]
        i, n, run = 0, len(starts), self.run
        for at, data in parts:  # rows and their runs ascending: one pass
            end, j = at + len(data), i
            while j < n and starts[j] + run <= end:
                j += 1
            if j > i:
                out[i:j] = self._take(data, at, rows[i:j], lo)
                i = j
            while i < n and starts[i] < end:  # its run goes on in the next piece
                self._across(out, i, parts, int(rows[i]), lo, starts[i])
                i += 1

    def _across(self, out: np.ndarray, i: int, parts: list[Piece], row: int, lo: int,
                a: int) -> None:
        """Row `row` into `out[i]`, its run crossing pieces: the lines of its box (values
        of axis 1) inside each piece viewed there, only a line that crosses copied (all of
        the run where axis 1 is chosen by indices)."""
        run, line, width = self.run, self.row, self.box[1] * self.item
        if not isinstance(self.index[1], slice):
            own = np.concatenate([d[max(a - p, 0):a + run - p] for p, d in parts
                                  if p < a + run and p + len(d) > a])
            out[i] = self.view(own, a, row, 1, lo)[0]
            return
        k, lines = 0, self.box[0]
        for at, data in parts:
            end = at + len(data)  # lines k.. j end inside this piece
            j = max(k, min(lines, (end - width - a) // line + 1))
            if j > k:
                box = np.ndarray((j - k, self.box[1]), self.dtype, buffer=data,
                                 offset=a + k * line - at, strides=(line, self.item))
                out[i, k:j] = box[:, self.index[2]]
                k = j
            if k < lines and a + k * line < end:  # this line crosses: its own bytes
                b = a + k * line
                own = np.concatenate([d[max(b - p, 0):b + width - p] for p, d in parts
                                      if p < b + width and p + len(d) > b])
                out[i, k] = own.view(self.dtype)[self.index[2]]
                k += 1

    def _take(self, data: np.ndarray, at: int, rows: np.ndarray, lo: int) -> np.ndarray:
        first_row, last_row = int(rows[0]), int(rows[-1])
        box = self.view(data, at, first_row, last_row - first_row + 1, lo)
        return box if last_row - first_row + 1 == len(rows) else box[rows - first_row]


def _spans(rows: np.ndarray, stride: int, run: int, gap: int) -> list[slice]:
    """`rows` (ascending; runs of `run` bytes, rows `stride` bytes apart) grouped into
    reads: a new read where more than `gap` bytes lie between two runs."""
    cuts = (np.flatnonzero(np.diff(rows) * stride - run > gap) + 1).tolist()
    return [slice(a, b) for a, b in zip([0] + cuts, cuts + [len(rows)], strict=True)]


def read_runs(read: ReadRange, name: str, base: int, shape: tuple[int, int, int],
              sel: Sequence[Selection], dtype: np.dtype, stride: int | None = None,
              out: np.ndarray | None = None) -> np.ndarray:
    """Elements `sel[0] x sel[1] x sel[2]` of a `shape` array of `dtype` stored from byte
    `base` (rows `stride` bytes apart; None: C order): `Window(...).read(...)` for one
    window."""
    return Window(base, shape, dtype, sel[1:], stride, read).read(read, name, sel[0], out)


__all__ = ["Piece", "ReadRange", "Selection", "Window", "checked", "count", "first",
           "read_runs"]
