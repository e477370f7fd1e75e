"""NumPy `.npy` files holding one (T, C) series: the header parsed and checked (numpy only).

Only the header is read here (`np.lib.format`'s own parsers, on the first bytes of the file);
the caller reads rows by byte range from `NpyHeader.offset`. Accepted: format versions 1-3,
a 2-d C-ordered array of a little-endian (or single-byte) float32, float16, int16 or uint8
dtype, T >= 1 rows and C >= 1 channels, and a file long enough for its rows. Anything else is
a `FormatError` naming the file and the field ("magic", "header", "dtype", "fortran_order",
"shape", "data size").
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from dali_pipes.formats.errors import FormatError

MAGIC = b"\x93NUMPY"
DTYPES = ("float32", "float16", "int16", "uint8")
HEAD_BYTES = 128  # numpy pads version-1 headers to a multiple of 64: most headers fit
_PREFIX = {1: 10, 2: 12, 3: 12}  # magic + version + header length field, per version


@dataclass(frozen=True)
class NpyHeader:
    """One checked `.npy` header: its dtype, shape (T, C) and where the rows start."""

    dtype: np.dtype
    shape: tuple[int, int]
    offset: int

    @property
    def row_bytes(self) -> int:
        return self.shape[1] * self.dtype.itemsize


def header_length(head: bytes, path: str) -> int:
    """Bytes from the start of the file to the first row, from its first 12 bytes (or all
    of a shorter file); FormatError for a bad magic string or an unknown version."""
    if len(head) < 10 or not head.startswith(MAGIC):
        raise FormatError(path, "magic", "not a NumPy .npy file", value=bytes(head[:6]),
                          expected=repr(MAGIC))
    version = head[6]
    if version not in _PREFIX or head[7] != 0:
        raise FormatError(path, "header", "unknown .npy format version",
                          value=(head[6], head[7]), expected="1.0, 2.0 or 3.0")
    size = _PREFIX[version]
    if len(head) < size:
        raise FormatError(path, "header", "the file ends inside its header", value=len(head))
    return size + int.from_bytes(head[size - (2 if version == 1 else 4):size], "little")


def parse_header(head: bytes, path: str, file_size: int) -> NpyHeader:
    """The checked header of a `.npy` file.

    Args:
        head: the file's first bytes, at least `header_length(head, path)` of them.
        path: the file, for messages.
        file_size: the file's size in bytes (checked against the rows the header claims).

    Returns:
        The header; FormatError naming `path` and the field otherwise.
    """
    offset = header_length(head, path)
    if len(head) < offset:
        raise FormatError(path, "header", "the file ends inside its header",
                          value=len(head), expected=f"{offset} bytes")
    fp = io.BytesIO(bytes(head[:offset]))
    try:
        version = np.lib.format.read_magic(fp)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(fp)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise FormatError(path, "header", f"cannot be parsed: {exc}") from exc
    return _checked(path, np.dtype(dtype), tuple(shape), bool(fortran), offset, file_size)


def _checked(path: str, dtype: np.dtype, shape: tuple, fortran: bool, offset: int,
             file_size: int) -> NpyHeader:
    if dtype.hasobject:
        raise FormatError(path, "dtype", "object arrays cannot be read without pickle",
                          value=str(dtype), expected=" / ".join(DTYPES))
    if dtype.name not in DTYPES or dtype.byteorder == ">":
        raise FormatError(path, "dtype", "unsupported element type", value=dtype.str,
                          expected=f"little-endian {' / '.join(DTYPES)}")
    if fortran:
        raise FormatError(path, "fortran_order", "Fortran-ordered arrays are not supported",
                          value=True, expected="False (save a C-contiguous array)")
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise FormatError(path, "shape", "expected a 2-d (T, C) array with T, C >= 1",
                          value=shape, expected="(T, C)")
    header = NpyHeader(np.dtype(dtype.name), (int(shape[0]), int(shape[1])), offset)
    need = offset + header.shape[0] * header.row_bytes
    if file_size < need:
        raise FormatError(path, "data size", "the file is shorter than its rows",
                          value=file_size, expected=f"{need} bytes for shape {shape}")
    return header


def check_like(header: NpyHeader, path: str, channels: int, dtype: np.dtype, *,
               held: str = "") -> None:
    """FormatError unless the series has `channels` channels and `dtype`: the data set's
    layout, which `held` describes in the message (e.g. " in 9 of the 10 readable files");
    the message names this file's layout and the data set's."""
    layouts = (f"this file (T, {header.shape[1]}) {header.dtype}, the data set "
               f"(T, {channels}) {np.dtype(dtype)}{held}")
    if header.shape[1] != channels:
        raise FormatError(path, "shape", f"channel count differs from the data set's: {layouts}")
    if header.dtype != dtype:
        raise FormatError(path, "dtype", f"element type differs from the data set's: {layouts}")


__all__ = ["DTYPES", "HEAD_BYTES", "MAGIC", "NpyHeader", "check_like", "header_length",
           "parse_header"]
