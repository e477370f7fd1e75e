"""A small SPE writer (2.x and 3.0 layouts) for tests and benchmark sample data.

It writes what the SPE 3.0 File Format Specification describes: the 4100-byte little-endian
binary header, the frames (each followed by its per-frame metadata in 3.0) and, for 3.0, a
LightField-shaped XML footer whose offset is stored in the header.
"""
from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import numpy as np

from dali_pipes.formats.spe import HEADER_FIELDS, PIXEL_FORMATS, SPE_DTYPES, SPE_HEADER_BYTES

_NAMESPACE = "http://www.princetoninstruments.com/spe/2009"
_WINVIEW_ID = (2996, "<i", 0x01234567)
_LASTVALUE = 0x5555


def _code_for(dtype: np.dtype, table) -> object:
    for code, candidate in table.items():
        if candidate.newbyteorder("=") == dtype.newbyteorder("="):
            return code
    raise ValueError(f"dtype {dtype} cannot be stored; allowed: "
                     f"{sorted(str(d) for d in table.values())}")


def _put(header: bytearray, field: str, *values) -> None:
    offset, fmt = HEADER_FIELDS[field]
    struct.pack_into(fmt, header, offset, *values)


def _binary_header(frames: np.ndarray, version: float, xml_offset: int,
                   polynomial: Sequence[float] | None) -> bytearray:
    count, ydim, xdim = frames.shape
    header = bytearray(SPE_HEADER_BYTES)
    datatype = _code_for(frames.dtype, SPE_DTYPES)
    for field, value in (("xdim", xdim), ("ydim", ydim), ("datatype", datatype),
                         ("NumFrames", count), ("NumROI", 1), ("XML_Offset", xml_offset),
                         ("file_header_ver", version), ("lastvalue", _LASTVALUE)):
        _put(header, field, value)
    struct.pack_into("<H", header, 6, xdim)  # xDimDet
    struct.pack_into("<H", header, 18, ydim)  # yDimDet
    struct.pack_into("<6H", header, 1512, 0, xdim - 1, 1, 0, ydim - 1, 1)  # ROIinfo[0]
    struct.pack_into(_WINVIEW_ID[1], header, _WINVIEW_ID[0], _WINVIEW_ID[2])
    if polynomial is not None:
        coeff = [float(c) for c in polynomial]
        if not 1 <= len(coeff) <= 6:
            raise ValueError("polynomial needs 1 to 6 coefficients")
        _put(header, "calib_valid_x", 1)
        _put(header, "polynom_order_x", len(coeff) - 1)
        _put(header, "polynom_coeff_x", *(coeff + [0.0] * (6 - len(coeff))))
    return header


def _footer(frames: np.ndarray, stride: int, meta_bytes: int,
            wavelengths: np.ndarray | None, sensor_x: int) -> bytes:
    count, ydim, xdim = frames.shape
    size = ydim * xdim * frames.dtype.itemsize
    root = ET.Element("SpeFormat", version="3.0", xmlns=_NAMESPACE)  # default namespace
    frame = ET.SubElement(ET.SubElement(root, "DataFormat"), "DataBlock", type="Frame",
                          version="3.0", count=str(count), size=str(size), stride=str(stride),
                          pixelFormat=str(_code_for(frames.dtype, PIXEL_FORMATS)))
    ET.SubElement(frame, "DataBlock", type="Region", version="3.0", count="1",
                  width=str(xdim), height=str(ydim), size=str(size), stride=str(size),
                  calibrations="1,2")
    if meta_bytes:
        meta = ET.SubElement(root, "MetaFormat")
        ET.SubElement(meta, "MetaBlock", type="TimeStamp", event="ExposureStarted",
                      metaFormat="Int64", bitDepth="64", resolution="1000000")
    calibrations = ET.SubElement(root, "Calibrations")
    if wavelengths is not None:
        mapping = ET.SubElement(calibrations, "WavelengthMapping", id="1")
        element = ET.SubElement(mapping, "Wavelength", xDimension=str(len(wavelengths)))
        element.text = ",".join(repr(float(w)) for w in wavelengths)
    ET.SubElement(calibrations, "SensorMapping", id="2", x=str(sensor_x), y="0",
                  width=str(xdim), height=str(ydim), xBinning="1", yBinning="1")
    return b'<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="utf-8")


def _frame_bytes(frames: np.ndarray, meta_bytes: int):
    little = frames.astype(frames.dtype.newbyteorder("<"), copy=False)
    for i, frame in enumerate(little):
        yield frame.tobytes()
        if meta_bytes:  # an Int64 exposure timestamp (microseconds), then filler bytes
            stamp = struct.pack("<q", 1000 * i)
            yield (stamp * (meta_bytes // 8 + 1))[:meta_bytes]


def write_spe(path: str | os.PathLike, frames: np.ndarray, *, version: float = 3.0,
              wavelengths: Sequence[float] | None = None, metadata_bytes_per_frame: int = 0,
              polynomial: Sequence[float] | None = None, sensor_x: int = 0) -> str:
    """Write ``frames`` (F, Y, X) as an SPE file and return its path.

    3.0: ``wavelengths`` go into the XML footer (length X, or the whole sensor with the region
    starting at ``sensor_x``); ``metadata_bytes_per_frame`` bytes follow each frame.
    2.x: ``polynomial`` (up to 6 coefficients, lowest order first) is the x calibration.
    """
    frames = np.asarray(frames)
    if frames.ndim != 3 or 0 in frames.shape:
        raise ValueError(f"frames must be a non-empty (F, Y, X) array, got shape {frames.shape}")
    is_v3 = version >= 3.0
    if is_v3 and polynomial is not None:
        raise ValueError("polynomial is the 2.x calibration; use wavelengths for 3.0")
    if not is_v3 and (wavelengths is not None or metadata_bytes_per_frame):
        raise ValueError("wavelengths and per-frame metadata need version 3.0")
    meta = int(metadata_bytes_per_frame)
    stride = frames[0].nbytes + meta
    footer = b""
    if is_v3:
        wl = None if wavelengths is None else np.asarray(wavelengths, dtype=np.float64)
        footer = _footer(frames, stride, meta, wl, sensor_x)
    xml_offset = SPE_HEADER_BYTES + len(frames) * stride if is_v3 else 0
    header = _binary_header(frames, version, xml_offset, polynomial)
    path = os.fspath(path)
    with open(path, "wb") as handle:
        handle.write(header)
        for chunk in _frame_bytes(frames, meta):
            handle.write(chunk)
        handle.write(footer)
    return path


__all__ = ["write_spe"]
