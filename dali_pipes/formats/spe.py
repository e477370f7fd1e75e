"""Princeton Instruments SPE files (WinSpec 2.x and LightField 3.0), read through a memory map.

Little-endian: a 4100-byte binary header, the frames, then (3.0 only) an XML footer at the
offset stored in the header; it is authoritative for frame count, pixel format, region size and
frame stride (which includes per-frame metadata). Several regions (ROIs) raise FormatError.
2.x wavelengths: the x calibration polynomial at pixels 1..xdim (WinSpec counts from 1).
"""
from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from dali_pipes.formats._mapped import MappedFile, check_index
from dali_pipes.formats.errors import FormatError

SPE_HEADER_BYTES = 4100
MAX_FOOTER_BYTES = 64 << 20  # LightField footers are kilobytes; more means a bad offset
#: binary header "datatype" code -> little-endian numpy dtype
SPE_DTYPES: Mapping[int, np.dtype] = MappingProxyType({
    0: np.dtype("<f4"), 1: np.dtype("<i4"), 2: np.dtype("<i2"), 3: np.dtype("<u2"),
    5: np.dtype("<f8"), 6: np.dtype("u1"), 8: np.dtype("<u4"),
})
#: LightField (3.0) pixelFormat -> little-endian numpy dtype
PIXEL_FORMATS: Mapping[str, np.dtype] = MappingProxyType({
    "MonochromeUnsigned16": np.dtype("<u2"), "MonochromeUnsigned32": np.dtype("<u4"),
    "MonochromeFloating32": np.dtype("<f4"),
})
#: header field -> (byte offset, struct format), from the SPE 3.0 File Format Specification
HEADER_FIELDS: Mapping[str, tuple[int, str]] = MappingProxyType({
    "xdim": (42, "<H"), "datatype": (108, "<h"), "ydim": (656, "<H"), "XML_Offset": (678, "<Q"),
    "NumFrames": (1446, "<i"), "NumROI": (1510, "<h"), "file_header_ver": (1992, "<f"),
    "calib_valid_x": (3098, "<B"), "polynom_order_x": (3101, "<B"),
    "polynom_coeff_x": (3263, "<6d"), "lastvalue": (4098, "<h"),
})


@dataclass(frozen=True, eq=False)
class SpeHeader:
    """The binary header fields this reader uses, as stored."""
    version: float
    xdim: int
    ydim: int
    datatype: int
    num_frames: int
    xml_offset: int
    num_roi: int
    calib_valid_x: bool
    polynom_order_x: int
    polynom_coeff_x: tuple[float, ...]


@dataclass(frozen=True, eq=False)
class SpeLayout:
    """Where the frames are: resolved from the XML footer (3.0) or the binary header (2.x)."""
    frames: int
    ydim: int
    xdim: int
    dtype: np.dtype  # on disk (little-endian)
    frame_bytes: int  # pixel bytes of one frame
    frame_stride: int  # bytes from one frame to the next (pixels + per-frame metadata)
    wavelengths: np.ndarray | None
    data_offset: int = SPE_HEADER_BYTES


def parse_spe_header(path: str, raw: bytes) -> SpeHeader:
    """The binary header from the file's first 4100 bytes."""
    if len(raw) < SPE_HEADER_BYTES:
        raise FormatError(path, "header", "file is shorter than the SPE header",
                          value=f"{len(raw)} bytes", expected=f">= {SPE_HEADER_BYTES} bytes")
    get = {k: struct.unpack_from(fmt, raw, off) for k, (off, fmt) in HEADER_FIELDS.items()}
    version = float(get["file_header_ver"][0])
    if not 0.0 <= version < 100.0:
        raise FormatError(path, "file_header_ver", "not a plausible version", value=version)
    return SpeHeader(
        version=round(version, 4), xdim=get["xdim"][0], ydim=get["ydim"][0],
        datatype=get["datatype"][0], num_frames=get["NumFrames"][0],
        xml_offset=get["XML_Offset"][0], num_roi=get["NumROI"][0],
        calib_valid_x=bool(get["calib_valid_x"][0]), polynom_order_x=get["polynom_order_x"][0],
        polynom_coeff_x=tuple(get["polynom_coeff_x"]),
    )


def _positive(path: str, field: str, value: int) -> int:
    if value < 1:
        raise FormatError(path, field, "must be at least 1", value=value)
    return int(value)


def _polynomial_wavelengths(path: str, header: SpeHeader) -> np.ndarray | None:
    if not header.calib_valid_x:
        return None
    order = header.polynom_order_x
    if order > 5:
        raise FormatError(path, "polynom_order_x", "calibration order out of range",
                          value=order, expected="0..5")
    coeff = np.asarray(header.polynom_coeff_x[: order + 1], dtype=np.float64)
    return np.polynomial.polynomial.polyval(np.arange(1, header.xdim + 1, dtype=np.float64), coeff)


def _layout_v2(path: str, header: SpeHeader) -> SpeLayout:
    if header.datatype not in SPE_DTYPES:
        raise FormatError(path, "datatype", "unknown data type code", value=header.datatype,
                          expected=sorted(SPE_DTYPES))
    if header.num_roi > 1:
        raise FormatError(path, "NumROI", "files with several regions are not supported",
                          value=header.num_roi, expected="0 or 1")
    xdim, ydim = _positive(path, "xdim", header.xdim), _positive(path, "ydim", header.ydim)
    dtype = SPE_DTYPES[header.datatype]
    frame_bytes = xdim * ydim * dtype.itemsize
    return SpeLayout(frames=_positive(path, "NumFrames", header.num_frames), ydim=ydim, xdim=xdim,
                     dtype=dtype, frame_bytes=frame_bytes, frame_stride=frame_bytes,
                     wavelengths=_polynomial_wavelengths(path, header))


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(parent: ET.Element, tag: str, **attrs: str) -> list[ET.Element]:
    return [e for e in parent if _local(e.tag) == tag
            and all(e.get(k) == v for k, v in attrs.items())]


def _int_attr(path: str, element: ET.Element, name: str, minimum: int = 1) -> int:
    field = f"XML {_local(element.tag)}[{element.get('type', '')}].{name}"
    try:
        value = int(element.get(name, ""))
    except ValueError as exc:
        raise FormatError(path, field, "missing or not an integer",
                          value=element.get(name)) from exc
    if value < minimum:
        raise FormatError(path, field, f"must be at least {minimum}", value=value)
    return value


def _read_footer(path: str, handle, header: SpeHeader, size: int) -> ET.Element:
    handle.seek(footer_range(path, header, size)[0])
    return parse_spe_footer(path, handle.read())


def footer_range(path: str, header: SpeHeader, size: int) -> tuple[int, int]:
    """(offset, end) of the XML footer of a 3.0 file of `size` bytes; FormatError naming
    the header's XML_Offset when it points outside the file's last MAX_FOOTER_BYTES."""
    if not max(SPE_HEADER_BYTES, size - MAX_FOOTER_BYTES) <= header.xml_offset < size:
        raise FormatError(path, "XML_Offset", "XML footer offset is outside the file's end",
                          value=header.xml_offset,
                          expected=f"{max(SPE_HEADER_BYTES, size - MAX_FOOTER_BYTES)}..{size - 1}")
    return header.xml_offset, size


def parse_spe_footer(path: str, data: bytes) -> ET.Element:
    """The XML footer's root element (SpeFormat), from its bytes."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise FormatError(path, "XML footer", f"cannot parse: {exc}") from exc
    if _local(root.tag) != "SpeFormat":
        raise FormatError(path, "XML footer", "root element is not SpeFormat", value=root.tag)
    return root


def _frame_blocks(path: str, root: ET.Element) -> tuple[ET.Element, ET.Element]:
    """The Frame DataBlock and its single Region DataBlock."""
    formats = _child(root, "DataFormat")
    frames = _child(formats[0], "DataBlock", type="Frame") if formats else []
    if len(frames) != 1:
        raise FormatError(path, "XML DataFormat", "need exactly one Frame DataBlock",
                          value=len(frames))
    regions = _child(frames[0], "DataBlock", type="Region")
    count = sum(_int_attr(path, r, "count") if "count" in r.attrib else 1 for r in regions)
    if len(regions) != 1 or count != 1:
        raise FormatError(path, "XML Region", "files with several regions are not supported",
                          value=max(count, len(regions)), expected=1)
    return frames[0], regions[0]


def _layout_v3(path: str, root: ET.Element) -> SpeLayout:
    frame, region = _frame_blocks(path, root)
    pixel_format = frame.get("pixelFormat")
    if pixel_format is None or pixel_format not in PIXEL_FORMATS:
        raise FormatError(path, "XML pixelFormat", "unsupported pixel format",
                          value=pixel_format, expected=sorted(PIXEL_FORMATS))
    dtype = PIXEL_FORMATS[pixel_format]
    width, height = _int_attr(path, region, "width"), _int_attr(path, region, "height")
    frame_bytes = width * height * dtype.itemsize
    size = _int_attr(path, frame, "size")
    stride = _int_attr(path, frame, "stride")
    if size != frame_bytes or stride < size:
        raise FormatError(path, "XML Frame.size/stride", "inconsistent with the region",
                          value=(size, stride), expected=f"size {frame_bytes}, stride >= size")
    return SpeLayout(frames=_int_attr(path, frame, "count"), ydim=height, xdim=width, dtype=dtype,
                     frame_bytes=frame_bytes, frame_stride=stride,
                     wavelengths=_xml_wavelengths(path, root, width))


def _parse_wavelength_text(path: str, element: ET.Element) -> np.ndarray:
    text = (element.text or "").strip()
    try:
        if _local(element.tag) == "WavelengthError":  # "wl,err wl,err ..."
            return np.array([float(p.split(",")[0]) for p in text.split()], dtype=np.float64)
        return np.array([float(t) for t in text.split(",") if t.strip()], dtype=np.float64)
    except ValueError as exc:
        raise FormatError(path, "XML Wavelength", "not a list of numbers", value=text[:60]) from exc


def _sensor_slice(root: ET.Element, values: np.ndarray, xdim: int) -> np.ndarray | None:
    """Wavelengths of the region when the mapping covers the whole sensor (SensorMapping)."""
    mappings = [m for c in _child(root, "Calibrations") for m in _child(c, "SensorMapping")]
    if len(mappings) != 1:
        return None
    try:
        x, width = int(mappings[0].get("x", "0")), int(mappings[0].get("width", "-1"))
        binning = int(mappings[0].get("xBinning", "1"))
    except ValueError:
        return None
    if binning < 1 or width != xdim * binning or x < 0 or x + width > values.size:
        return None
    return values[x:x + width].reshape(xdim, binning).mean(axis=1)


def _xml_wavelengths(path: str, root: ET.Element, xdim: int) -> np.ndarray | None:
    mapping = [m for c in _child(root, "Calibrations") for m in _child(c, "WavelengthMapping")]
    elements = [e for m in mapping[:1] for e in m
                if _local(e.tag) in ("Wavelength", "WavelengthError")]
    if not elements:
        return None
    values = _parse_wavelength_text(path, elements[0])
    if values.size == xdim:
        return values
    sliced = _sensor_slice(root, values, xdim)
    if sliced is None:
        raise FormatError(path, "XML Wavelength", "wavelength count does not match the x size",
                          value=values.size, expected=xdim)
    return sliced


class SpeFile(MappedFile):
    """A memory-mapped SPE file; reads return independent native-endian arrays."""

    def __init__(self, path: str, header: SpeHeader, layout: SpeLayout, xml: ET.Element | None):
        self.path, self.header, self.layout, self.xml = path, header, layout, xml
        self._open_map(path, np.dtype(np.uint8), layout.data_offset,
                       (layout.frames, layout.frame_stride))

    shape = property(lambda self: (self.layout.frames, self.layout.ydim, self.layout.xdim))
    dtype = property(lambda self: self.layout.dtype.newbyteorder("="))
    version = property(lambda self: self.header.version)
    wavelengths = property(lambda self: self.layout.wavelengths)

    def _view(self, start: int, stop: int, rows: tuple[int, int]) -> np.ndarray:
        """A view of the map: frames ``start:stop``, rows ``rows[0]:rows[1]`` of each (one
        contiguous run of bytes per frame), as (frames, rows, xdim) in the file's dtype."""
        row_bytes = self.layout.xdim * self.layout.dtype.itemsize
        first, last = rows[0] * row_bytes, rows[1] * row_bytes
        data = self._mapped(self.layout.data_offset + (stop - 1) * self.layout.frame_stride
                            + last)
        values = data[start:stop, first:last].view(self.layout.dtype)
        return values.reshape(stop - start, rows[1] - rows[0], self.layout.xdim)

    def read_frame(self, i: int) -> np.ndarray:
        """Frame ``i`` as a (ydim, xdim) array."""
        i = check_index("i", i, self.layout.frames)
        return np.array(self._view(i, i + 1, (0, self.layout.ydim))[0], dtype=self.dtype)

    def read_frames(self, start: int, stop: int, *, rows: tuple[int, int] | None = None,
                    columns: Sequence[int] | None = None) -> np.ndarray:
        """Frames ``start:stop`` (start < stop) as a (stop - start, n_rows, n_columns) array:
        ``rows`` a ``(first, end)`` range of y (default: all), ``columns`` x indices (default:
        all). Only the bytes of those rows are read from each frame."""
        start = check_index("start", start, self.layout.frames)
        if not isinstance(stop, (int, np.integer)) or not start < stop <= self.layout.frames:
            raise IndexError(f"stop={stop!r} must be an int in ({start}, {self.layout.frames}]")
        rows, columns = self._rows(rows), self._columns(columns)
        values = self._view(start, int(stop), rows)
        if columns is None:
            return np.array(values, dtype=self.dtype)
        return np.asarray(values[:, :, columns], dtype=self.dtype)  # indexing copied already

    @property
    def geometry(self) -> tuple[int, int, int]:
        """(bands, lines, samples) of the `Cube` protocol: (xdim, frames, ydim)."""
        return self.layout.xdim, self.layout.frames, self.layout.ydim

    @property
    def files(self) -> tuple[str, ...]:
        """`Cube` protocol: the one .spe file."""
        return (self.path,)

    def read_window(self, y: int, x: int, h: int, w: int, bands=None) -> np.ndarray:
        """`Cube` protocol: (n_bands, h, w) of frames ``y:y+h``, y-rows ``x:x+w`` and x
        columns ``bands`` (None: all)."""
        for name, size in (("h", h), ("w", w)):
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                raise ValueError(f"{name} must be a positive int, got {size!r}")
        frames = self.read_frames(y, y + h, rows=(x, x + w), columns=bands)  # (h, w, n_bands)
        return np.ascontiguousarray(frames.transpose(2, 0, 1))

    def _rows(self, rows) -> tuple[int, int]:
        if rows is None:
            return 0, self.layout.ydim
        first = check_index("rows[0]", rows[0], self.layout.ydim)
        end = rows[1]
        if not isinstance(end, (int, np.integer)) or not first < end <= self.layout.ydim:
            raise IndexError(f"rows[1]={end!r} must be an int in ({first}, {self.layout.ydim}]")
        return first, int(end)

    def _columns(self, columns) -> list[int] | None:
        if columns is None:
            return None
        if isinstance(columns, (str, bytes)) or not isinstance(columns, (Sequence, np.ndarray)):
            raise TypeError(f"columns must be None or a sequence of ints, got "
                            f"{type(columns).__name__}")
        if len(columns) == 0:
            raise ValueError("columns must not be empty")
        return [check_index(f"columns[{k}]", c, self.layout.xdim) for k, c in enumerate(columns)]

    def __reduce__(self):  # pickles as "open it again", e.g. for worker processes
        return open_spe, (self.path,)


def open_spe(path: str | os.PathLike) -> SpeFile:
    """Open a WinSpec (2.x) or LightField (3.0) SPE file, validating header, footer and size."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            header = parse_spe_header(path, handle.read(SPE_HEADER_BYTES))
            root = _read_footer(path, handle, header, size) if header.version >= 3 else None
    except OSError as exc:
        raise FormatError(path, "file", f"cannot read: {exc.strerror}") from exc
    return SpeFile(path, header, spe_layout(path, header, root, size), root)


def spe_layout(path: str, header: SpeHeader, root: ET.Element | None, size: int
               ) -> SpeLayout:
    """The frames' layout of a file of `size` bytes (from its footer `root` for 3.0, else
    the binary header), checked against the size."""
    layout = _layout_v2(path, header) if root is None else _layout_v3(path, root)
    available = size if root is None else header.xml_offset  # 3.0: the footer follows the data
    needed = layout.data_offset + layout.frames * layout.frame_stride
    if needed > available:
        raise FormatError(path, "data size", "file is too short for the frames it declares",
                          value=f"{available} bytes", expected=f">= {needed} bytes")
    if layout.wavelengths is not None:
        layout.wavelengths.flags.writeable = False
    return layout


__all__ = ["HEADER_FIELDS", "PIXEL_FORMATS", "SPE_DTYPES", "SPE_HEADER_BYTES", "SpeFile",
           "SpeHeader", "SpeLayout", "footer_range", "open_spe", "parse_spe_footer",
           "parse_spe_header", "spe_layout"]
