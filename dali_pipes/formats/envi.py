"""ENVI cubes: a text header (``x.hdr``) beside a raw data file, read through a memory map.
Everything is validated on open; reads touch only the bytes they need and return native copies
(after checking that the file still holds them: see ``_mapped``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from dali_pipes.formats._mapped import MappedFile, check_index
from dali_pipes.formats.errors import FormatError

#: ENVI "data type" code -> numpy dtype (byte order applied separately).
ENVI_DTYPES: Mapping[int, np.dtype] = MappingProxyType({
    1: np.dtype("u1"), 2: np.dtype("i2"), 3: np.dtype("i4"), 4: np.dtype("f4"),
    5: np.dtype("f8"), 6: np.dtype("c8"), 9: np.dtype("c16"), 12: np.dtype("u2"),
    13: np.dtype("u4"), 14: np.dtype("i8"), 15: np.dtype("u8"),
})
_BYTE_ORDERS: Mapping[int, Literal["<", ">"]] = MappingProxyType({0: "<", 1: ">"})
_INTERLEAVES = ("bsq", "bil", "bip")
_REQUIRED = ("samples", "lines", "bands", "data type", "interleave", "byte order")
_DATA_EXTENSIONS = ("", ".img", ".dat", ".raw", ".bin", ".bsq", ".bil", ".bip")
Interleave = Literal["bsq", "bil", "bip"]


@dataclass(frozen=True, eq=False)
class EnviHeader:
    """Every field of an ENVI header that this reader understands, validated."""
    samples: int
    lines: int
    bands: int
    data_type: int
    interleave: Interleave
    byte_order: int
    header_offset: int = 0
    wavelength: np.ndarray | None = None
    wavelength_units: str | None = None
    fwhm: np.ndarray | None = None
    bbl: np.ndarray | None = None
    band_names: tuple[str, ...] | None = None
    data_ignore_value: float | None = None
    reflectance_scale_factor: float | None = None
    description: str | None = None
    raw: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def dtype(self) -> np.dtype:
        """The on-disk dtype, byte order included."""
        return ENVI_DTYPES[self.data_type].newbyteorder(_BYTE_ORDERS[self.byte_order])


def _split_fields(path: str, text: str) -> dict[str, str]:
    """``key = value`` pairs (keys lower-cased); ``{...}`` values may span several lines."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "ENVI":
        first = lines[0].strip()[:40] if lines else ""
        raise FormatError(path, "first line", "not an ENVI header", value=first, expected="'ENVI'")
    fields: dict[str, str] = {}
    i = 1
    while i < len(lines):
        line, i = lines[i].strip(), i + 1
        if not line or line.startswith(";"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise FormatError(path, f"line {i}", "expected 'key = value'", value=line[:60])
        value = value.strip()
        if value.startswith("{"):
            while "}" not in value and i < len(lines):
                value, i = value + "\n" + lines[i].strip(), i + 1
            if "}" not in value:
                raise FormatError(path, key.strip().lower(), "'{' is never closed")
            value = value[1:value.index("}")].strip()
        fields[" ".join(key.lower().split())] = value
    return fields


def _int_field(path: str, fields: Mapping[str, str], key: str, minimum: int) -> int:
    if key not in fields:  # only optional keys get here missing
        return 0
    try:
        number = int(fields[key])
    except ValueError as exc:
        raise FormatError(path, key, "not an integer", value=fields[key]) from exc
    if number < minimum:
        raise FormatError(path, key, "out of range", value=number, expected=f">= {minimum}")
    return number


def _float_field(path: str, fields: Mapping[str, str], key: str) -> float | None:
    if key not in fields:
        return None
    try:
        return float(fields[key])
    except ValueError as exc:
        raise FormatError(path, key, "not a number", value=fields[key]) from exc


def _list_field(path: str, fields: Mapping[str, str], key: str, bands: int,
                dtype: type | None = float):
    """A per-band ``{a, b, ...}`` list as a read-only array (or tuple of str); None if absent."""
    if key not in fields:
        return None
    items = [s.strip() for s in fields[key].split(",")]
    if len(items) != bands:
        raise FormatError(path, key, "one value per band needed", value=len(items), expected=bands)
    if dtype is None:
        return tuple(items)
    try:
        array: np.ndarray = np.array([float(s) for s in items]).astype(dtype)
    except ValueError as exc:
        raise FormatError(path, key, "not a list of numbers", value=fields[key][:60]) from exc
    array.flags.writeable = False
    return array


def _choice_field(path: str, fields: Mapping[str, str], key: str, allowed):
    text = fields[key].strip().lower()
    try:
        value: int | str = int(text) if isinstance(allowed[0], int) else text
    except ValueError as exc:
        raise FormatError(path, key, "not an integer", value=fields[key]) from exc
    if value not in allowed:
        raise FormatError(path, key, "unsupported value", value=fields[key], expected=list(allowed))
    return value


def parse_envi_header(path: str | os.PathLike, text: str) -> EnviHeader:
    """Validate header ``text`` (read from ``path``, named in errors) into an EnviHeader."""
    path = os.fspath(path)
    fields = _split_fields(path, text)
    for key in _REQUIRED:
        if key not in fields:
            raise FormatError(path, key, "required key is missing")
    bands = _int_field(path, fields, "bands", 1)
    return EnviHeader(
        samples=_int_field(path, fields, "samples", 1),
        lines=_int_field(path, fields, "lines", 1), bands=bands,
        data_type=_choice_field(path, fields, "data type", tuple(ENVI_DTYPES)),
        interleave=_choice_field(path, fields, "interleave", _INTERLEAVES),
        byte_order=_choice_field(path, fields, "byte order", tuple(_BYTE_ORDERS)),
        header_offset=_int_field(path, fields, "header offset", 0),
        wavelength=_list_field(path, fields, "wavelength", bands, np.float64),
        wavelength_units=fields.get("wavelength units"),
        fwhm=_list_field(path, fields, "fwhm", bands, np.float64),
        bbl=_list_field(path, fields, "bbl", bands, bool),
        band_names=_list_field(path, fields, "band names", bands, None),
        data_ignore_value=_float_field(path, fields, "data ignore value"),
        reflectance_scale_factor=_float_field(path, fields, "reflectance scale factor"),
        description=fields.get("description"),
        raw=MappingProxyType(dict(fields)),
    )


def _find_beside(directory: str, names: Sequence[str]) -> str | None:
    """First of ``names`` present as a file in ``directory``, compared case-insensitively."""
    try:
        entries = sorted(os.listdir(directory or "."))
    except OSError:
        return None
    by_lower = {entry.lower(): entry for entry in reversed(entries)}  # first in sorted order
    for name in names:
        for found in (name, by_lower.get(name.lower())):
            if found and os.path.isfile(os.path.join(directory, found)):
                return os.path.join(directory, found)
    return None


def data_file_candidates(header_name: str) -> list[str]:
    """The names a data file beside the header `header_name` (``x.hdr``) may have, in the
    order they are looked for."""
    stem = header_name[:-4]
    candidates = [stem + ext for ext in _DATA_EXTENSIONS]
    return list(dict.fromkeys(  # x.img.hdr: x.img first, then x.dat, x.raw, ...
        candidates + [os.path.splitext(stem)[0] + e for e in _DATA_EXTENSIONS[1:]]))


def locate_envi_files(path: str | os.PathLike) -> tuple[str, str]:
    """(header path, data path) for ``path`` naming either the .hdr or the data file."""
    path = os.fspath(path)
    directory, name = os.path.split(path)
    if name.lower().endswith(".hdr"):
        candidates = data_file_candidates(name)
        data = _find_beside(directory, candidates)
        if not os.path.isfile(path):
            raise FormatError(path, "header", "file not found")
        if data is None:
            raise FormatError(path, "data file", "no data file beside the header",
                              expected=f"one of {candidates}")
        return path, data
    if not os.path.isfile(path):
        raise FormatError(path, "data file", "file not found")
    header = _find_beside(directory, [name + ".hdr", os.path.splitext(name)[0] + ".hdr"])
    if header is None:
        raise FormatError(path, "header", "no .hdr file beside the data file",
                          expected=f"{name}.hdr or {os.path.splitext(name)[0]}.hdr")
    return header, path


def read_envi_header(path: str | os.PathLike) -> EnviHeader:
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError as exc:
        raise FormatError(path, "header", f"cannot read: {exc.strerror}") from exc
    return parse_envi_header(path, text)


_LAYOUTS = MappingProxyType({  # memmap axes per interleave, and the transpose to (band, y, x)
    "bsq": (("bands", "lines", "samples"), (0, 1, 2)),
    "bil": (("lines", "bands", "samples"), (1, 0, 2)),
    "bip": (("lines", "samples", "bands"), (2, 0, 1)),
})


class EnviCube(MappedFile):
    """A memory-mapped ENVI cube; every read returns an independent native-endian array."""

    def __init__(self, path: str, data_path: str, header: EnviHeader):
        self.path = path
        self.data_path = data_path
        self.header = header
        self._axes, self._to_bsq = _LAYOUTS[header.interleave]
        shape = tuple(getattr(header, axis) for axis in self._axes)
        self._open_map(data_path, header.dtype, header.header_offset, shape)

    shape = property(lambda self: (self.header.bands, self.header.lines, self.header.samples))
    dtype = property(lambda self: ENVI_DTYPES[self.header.data_type])
    interleave = property(lambda self: self.header.interleave)
    wavelengths = property(lambda self: self.header.wavelength)

    def _band_index(self, bands) -> slice | list[int]:
        if bands is None:
            return slice(None)
        if isinstance(bands, (str, bytes)) or not isinstance(bands, (Sequence, np.ndarray)):
            raise TypeError(f"bands must be None or a sequence of ints, got {type(bands).__name__}")
        if len(bands) == 0:
            raise ValueError("bands must not be empty")
        return [check_index(f"bands[{i}]", b, self.header.bands) for i, b in enumerate(bands)]

    def _native(self, view: np.ndarray) -> np.ndarray:
        return np.array(view.transpose(self._to_bsq), dtype=self.dtype, order="C")

    def read_band(self, b: int) -> np.ndarray:
        """Band ``b`` as a (lines, samples) array."""
        b = check_index("b", b, self.header.bands)
        return self._native(self._index(slice(b, b + 1), slice(None), slice(None)))[0]

    def read_patch(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """Window ``[y:y+h, x:x+w]`` of the chosen bands as a (n_bands, h, w) array."""
        for name, size in (("h", h), ("w", w)):
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                raise ValueError(f"{name} must be a positive int, got {size!r}")
        y = check_index("y", y, self.header.lines)
        x = check_index("x", x, self.header.samples)
        if y + h > self.header.lines or x + w > self.header.samples:
            raise IndexError(f"patch y={y}, x={x}, h={h}, w={w} exceeds "
                             f"(lines, samples)=({self.header.lines}, {self.header.samples})")
        return self._native(self._index(self._band_index(bands), slice(y, y + h), slice(x, x + w)))

    @property
    def geometry(self) -> tuple[int, int, int]:
        """(bands, lines, samples), as the `Cube` protocol has it (the shape)."""
        return self.shape

    @property
    def files(self) -> tuple[str, ...]:
        """`Cube` protocol: the header and the data file."""
        return self.path, self.data_path

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """`Cube` protocol: the same as `read_patch`."""
        return self.read_patch(y, x, h, w, bands=bands)

    def _end(self, bands, rows: slice, cols: slice) -> int:
        """One past the last byte a read of these bands, rows and columns touches."""
        wanted = {"bands": bands, "lines": rows, "samples": cols}
        flat = 0
        for axis in self._axes:  # strides only grow outwards: the last element is the furthest
            size, index = getattr(self.header, axis), wanted[axis]
            last = (size if index.stop is None else index.stop) - 1 \
                if isinstance(index, slice) else max(index)
            flat = flat * size + last
        return self.header.header_offset + (flat + 1) * self.header.dtype.itemsize

    def _index(self, bands, rows: slice, cols: slice) -> np.ndarray:
        data = self._mapped(self._end(bands, rows, cols))
        if self.header.interleave == "bsq":
            return data[bands, rows, cols]
        if self.header.interleave == "bil":
            return data[rows, bands, cols]
        return data[rows, cols, bands]

    def __reduce__(self):  # pickles as "open it again", e.g. for worker processes
        return open_envi, (self.path,)


def open_envi(path: str | os.PathLike) -> EnviCube:
    """Open an ENVI cube from its ``.hdr`` or from the data file beside its ``.hdr``."""
    header_path, data_path = locate_envi_files(path)
    header = read_envi_header(header_path)
    found = os.path.getsize(data_path)
    pixels = header.samples * header.lines * header.bands
    expected = header.header_offset + pixels * header.dtype.itemsize
    if found != expected:
        what = "truncated" if found < expected else "larger than the header says"
        raise FormatError(data_path, "data size", f"data file is {what} (header {header_path})",
                          value=f"{found} bytes", expected=f"{expected} bytes")
    return EnviCube(header_path, data_path, header)


__all__ = ["ENVI_DTYPES", "EnviCube", "EnviHeader", "data_file_candidates", "locate_envi_files",
           "open_envi", "parse_envi_header", "read_envi_header"]
