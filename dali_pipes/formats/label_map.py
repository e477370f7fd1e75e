"""Label maps: `<scene>.labels.npy`, an integer (lines, samples) array, 0 meaning unlabeled.

The .npy header is parsed and checked before a byte of data is read (numpy's own loader
lets a bad header escape as tokenize.TokenError, SyntaxError or a MemoryError for a shape
the file cannot hold, naming no file), and labels that do not fit int64 (uint64 >= 2**63)
are refused instead of wrapping to negative numbers.
"""
from __future__ import annotations

import os
import stat

import numpy as np

from dali_pipes.formats.errors import FormatError

_INT64_MAX = np.iinfo(np.int64).max


def read_label_map(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """The label map at `path`, checked against the scene's (lines, samples).

    Args:
        path: the .npy file.
        shape: the (lines, samples) the scene has.

    Returns:
        The int array as stored. FormatError naming the file and the field ("label map header",
        "... shape", "... dtype", "... size", "... values") for anything else.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FormatError(path, "file", "is not a regular file")
            dtype, found, fortran = _header(f, path)
            _check_layout(path, dtype, found, shape)
            needed = int(np.prod(found)) * dtype.itemsize
            available = os.fstat(f.fileno()).st_size - f.tell()
            if available < needed:
                raise FormatError(path, "label map size", "file is shorter than its header "
                                  "says", value=f"{available} bytes", expected=f">= {needed} bytes")
            labels = np.fromfile(f, dtype=dtype, count=int(np.prod(found)))
    except OSError as exc:
        raise FormatError(path, "file", f"cannot read: {exc.strerror or exc}") from exc
    labels = labels.reshape(found, order="F" if fortran else "C")
    _check_values(path, labels)
    return labels


def parse_label_map(data: bytes, path: str, shape: tuple[int, int]) -> np.ndarray:
    """The label map held in the bytes `data` of a .npy file (an object behind a URL, named
    `path` in errors), checked as `read_label_map` checks a file."""
    import io
    f = io.BytesIO(data)
    dtype, found, fortran = _header(f, path)
    _check_layout(path, dtype, found, shape)
    count = int(np.prod(found))
    needed, available = count * dtype.itemsize, len(data) - f.tell()
    if available < needed:
        raise FormatError(path, "label map size", "file is shorter than its header says",
                          value=f"{available} bytes", expected=f">= {needed} bytes")
    labels = np.frombuffer(data, dtype, count, f.tell()).reshape(
        found, order="F" if fortran else "C").copy()
    _check_values(path, labels)
    return labels


def _header(f, path: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        found, fortran, dtype = reader(f)
    except Exception as exc:  # numpy raises ValueError, SyntaxError, tokenize.TokenError...
        raise FormatError(path, "label map header", f"not a valid .npy header: "
                          f"{type(exc).__name__}: {exc}") from exc
    return np.dtype(dtype), tuple(int(n) for n in found), bool(fortran)


def _check_layout(path: str, dtype: np.dtype, found: tuple[int, ...], shape) -> None:
    if dtype.kind not in "iu" or dtype.fields is not None:
        raise FormatError(path, "label map dtype", "not an integer array", value=str(dtype),
                          expected="an integer dtype")
    if found != tuple(shape):
        raise FormatError(path, "label map shape", "differs from the scene's (lines, samples)",
                          value=found, expected=tuple(shape))


def _check_values(path: str, labels: np.ndarray) -> None:
    if not labels.size:
        return
    if labels.dtype.kind == "i" and labels.min() < 0:
        raise FormatError(path, "label map values", "negative label", value=int(labels.min()),
                          expected=">= 0 (0 means unlabeled)")
    if labels.dtype.kind == "u" and labels.dtype.itemsize == 8 and labels.max() > _INT64_MAX:
        raise FormatError(path, "label map values", "label does not fit int64",
                          value=int(labels.max()), expected=f"<= {_INT64_MAX}")
