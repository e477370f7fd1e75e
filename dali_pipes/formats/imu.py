"""IMU / sensor streams stored as `<stem>.imu.csv` beside a video file.

Layout: a header row `t,<channel>,<channel>,...` then one row per sample, comma separated, all
cells numbers. `t` is seconds on the sensor's clock; rows need not be sorted (alignment sorts).
Lines are numbered as an editor shows them: the header is line 1, the first sample line 2.
Trailing blank lines are ignored; a blank line between samples is an error. Every cell must be
finite: a NaN or infinite timestamp or value is reported (line and column) rather than passed
on to alignment, where it would silently poison whole frames.

`read_imu` validates the whole file and raises `FormatError` naming the file, the line and,
for a bad cell, the column. Parsing goes through numpy's C parser (`np.loadtxt`) in one call;
only when that fails does a per-line pass run, to find and name the first offending cell.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.files import read_file_bytes

IMU_SUFFIX = ".imu.csv"
TIME_COLUMN = "t"
MIN_ROWS = 2


@dataclass(frozen=True, eq=False)
class ImuStream:
    """One sensor stream: `t` (N,) float64 seconds, `values` (N, D) float64, read-only arrays."""

    path: str
    t: np.ndarray
    values: np.ndarray
    channels: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.t.shape[0])


def imu_path_for(video_path: str | os.PathLike) -> Path:
    """The `<stem>.imu.csv` that sits beside a video file (it may not exist)."""
    video = Path(video_path)
    return video.with_name(video.stem + IMU_SUFFIX)


def read_imu(path: str | os.PathLike) -> ImuStream:
    """Read and validate a `<stem>.imu.csv` file."""
    path = os.fspath(path)
    return _parse(path, _read_text(path))


def parse_imu(name: str, raw: bytes) -> ImuStream:
    """Validate the bytes of an IMU file read elsewhere (an object in a store, a tar
    member), named `name` in errors, as `read_imu` validates a file."""
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise FormatError(name, "file", f"cannot be read as UTF-8 text: {exc}") from exc
    return _parse(name, text)


def _parse(path: str, text: str) -> ImuStream:
    header, body = _split_header(path, text)
    channels = _parse_header(path, header)
    table = _parse_table(path, body, (TIME_COLUMN,) + channels)
    _check_finite(path, table, channels)
    t = np.ascontiguousarray(table[:, 0])
    values = np.ascontiguousarray(table[:, 1:])
    t.flags.writeable = False
    values.flags.writeable = False
    return ImuStream(path=path, t=t, values=values, channels=channels)


def write_imu(path: str | os.PathLike, t, values, channels) -> Path:
    """Write a stream in the layout `read_imu` reads; floats round-trip exactly (%.17g)."""
    t = np.asarray(t, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    channels = tuple(channels)
    if t.ndim != 1 or values.ndim != 2 or values.shape[0] != t.shape[0]:
        raise ValueError(f"t must be (N,) and values (N, D); got {t.shape} and {values.shape}")
    if values.shape[1] != len(channels):
        raise ValueError(f"values has {values.shape[1]} columns but {len(channels)} channels "
                         f"were named")
    for name in channels:
        bad = not isinstance(name, str) or not name.strip() or name.strip() == TIME_COLUMN
        if bad or any(c in name for c in ",\r\n"):
            raise ValueError(f"channel names must be non-empty text other than "
                             f"{TIME_COLUMN!r}, without commas or newlines, got {name!r}")
    header = ",".join((TIME_COLUMN,) + channels)
    out = Path(path)
    np.savetxt(out, np.column_stack([t, values]), fmt="%.17g", delimiter=",",
               header=header, comments="")
    return out


# ----------------------------------------------------------------------------- helpers

def _read_text(path: str) -> str:
    """Whole file as text; universal newlines, so every line ends in a bare "\\n"."""
    try:
        raw = read_file_bytes(path).tobytes()  # never blocks on a FIFO
        return raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except FileNotFoundError as exc:
        raise FormatError(path, "file", "no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(path, "file", f"cannot be read as UTF-8 text: {exc}") from exc


def _split_header(path: str, text: str) -> tuple[str, str]:
    """(header line, data lines without trailing blank lines)."""
    header, _, body = text.partition("\n")
    if not header.strip():
        raise FormatError(path, "line 1 (header)", "file is empty or has no header row",
                          expected=f"'{TIME_COLUMN},<channel>,...'")
    return header, body.rstrip()


def _parse_header(path: str, header: str) -> tuple[str, ...]:
    names = [cell.strip() for cell in header.split(",")]
    if names[0] != TIME_COLUMN:
        raise FormatError(path, "line 1 (header), column 1", "first column must be time",
                          value=names[0], expected=repr(TIME_COLUMN))
    if len(names) < 2:
        raise FormatError(path, "line 1 (header)", "no channel columns after 't'")
    seen: dict[str, int] = {}
    for col, name in enumerate(names, start=1):
        if not name:
            raise FormatError(path, f"line 1 (header), column {col}", "empty channel name")
        if name in seen:
            raise FormatError(path, f"line 1 (header), column {col}",
                              f"duplicate column name (also column {seen[name]})", value=name)
        seen[name] = col
    return tuple(names[1:])


def _parse_table(path: str, body: str, columns: tuple[str, ...]) -> np.ndarray:
    """All data lines in one np.loadtxt call; on any doubt, _diagnose names the bad line."""
    n_rows = body.count("\n") + 1 if body else 0
    if n_rows < MIN_ROWS:
        raise FormatError(path, "rows", "too few data rows", value=n_rows,
                          expected=f"at least {MIN_ROWS}")
    try:
        table = np.loadtxt(io.StringIO(body), dtype=np.float64, delimiter=",",
                           comments=None, ndmin=2)
    except ValueError as exc:
        _diagnose(path, body, columns)
        raise FormatError(path, "rows", f"cannot parse as numbers: {exc}") from exc
    if table.shape != (n_rows, len(columns)):  # loadtxt skips blank lines: count them here
        _diagnose(path, body, columns)
        raise FormatError(path, "rows", "table shape does not match the header",
                          value=table.shape, expected=(n_rows, len(columns)))
    return table


def _diagnose(path: str, body: str, columns: tuple[str, ...]) -> None:
    """Slow pass over the lines: raise FormatError for the first bad line or cell."""
    n_cols = len(columns)
    for lineno, line in enumerate(body.split("\n"), start=2):
        cells = line.split(",")
        if len(cells) != n_cols:
            what = "blank line" if not line.strip() else f"{len(cells)} cells"
            raise FormatError(path, f"line {lineno}", f"wrong number of cells ({what})",
                              value=line[:80], expected=f"{n_cols} cells like the header")
        for col, cell in enumerate(cells, start=1):
            if not _is_number(cell):
                raise FormatError(path, f"line {lineno}, column {col} ({columns[col - 1]})",
                                  "not a number", value=cell)


def _is_number(cell: str) -> bool:
    """What np.loadtxt accepts: Python float syntax, ASCII only, no digit separators."""
    text = cell.strip()
    if not text.isascii() or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_finite(path: str, table: np.ndarray, channels: tuple[str, ...]) -> None:
    bad = np.argwhere(~np.isfinite(table))
    if bad.size == 0:
        return
    row, col = (int(i) for i in bad[0])
    name = TIME_COLUMN if col == 0 else channels[col - 1]
    what = "timestamp" if col == 0 else "value"
    raise FormatError(path, f"line {row + 2}, column {col + 1} ({name})",
                      f"{what} must be finite; {len(bad)} NaN or infinite cell(s) in the file",
                      value=float(table[row, col]))
