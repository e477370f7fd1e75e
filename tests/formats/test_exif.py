"""EXIF Orientation read from the bytes of real files written by Pillow, in every format
that carries it, and applied exactly as Pillow's `ImageOps.exif_transpose`."""
from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image, ImageOps

from dali_pipes.formats.exif import (
    exif_orientation,
    inverse_orientation,
    orient_array,
    oriented_size,
)

H, W = 12, 20
FORMATS = {"JPEG": {"quality": 95}, "PNG": {}, "WEBP": {"lossless": True}, "TIFF": {}}


def _pixels() -> np.ndarray:
    y, x = np.mgrid[:H, :W]
    return np.stack([x * 12, y * 20, (x * 7 + y * 3) % 256], -1).astype(np.uint8)


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _save(fmt: str, orientation: int | None, pixels=None) -> bytes:
    out = io.BytesIO()
    extra = {} if orientation is None else {"exif": _exif(orientation)}
    Image.fromarray(_pixels() if pixels is None else pixels).save(out, fmt, **FORMATS[fmt],
                                                                 **extra)
    return out.getvalue()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("orientation", range(1, 9))
def test_the_tag_is_read_from_the_bytes_as_pillow_reads_it(fmt, orientation):
    data = _save(fmt, orientation)
    assert Image.open(io.BytesIO(data)).getexif().get(0x0112) == orientation
    assert exif_orientation(data) == orientation
    assert exif_orientation(np.frombuffer(data, np.uint8)) == orientation


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orient_array_is_pillows_exif_transpose(orientation):
    data = _save("PNG", orientation)  # lossless; Pillow does not turn PNGs on load
    stored = np.asarray(Image.open(io.BytesIO(data)))
    want = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))))
    got = orient_array(stored, orientation)
    assert got.shape == want.shape and np.array_equal(got, want)
    assert got.shape[:2] == oriented_size((H, W), orientation)
    assert np.array_equal(orient_array(got, inverse_orientation(orientation)), stored)


def test_files_without_a_tag_read_as_upright():
    for fmt in FORMATS:
        assert exif_orientation(_save(fmt, None)) == 1, fmt
    for fmt, kw in (("JPEG2000", {}), ("BMP", {}), ("GIF", {})):
        out = io.BytesIO()
        Image.fromarray(_pixels()).save(out, fmt, **kw)
        assert exif_orientation(out.getvalue()) == 1, fmt
    assert exif_orientation(b"") == 1 and exif_orientation(b"hello") == 1


def _jpeg_with_app1(payload: bytes) -> bytes:
    """A real JPEG with an APP1 segment holding `payload` right after SOI."""
    data = _save("JPEG", None)
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return data[:2] + segment + data[2:]


def _tiff_block(value: int, *, ifd: int = 8, kind: int = 3) -> bytes:
    entry = struct.pack("<HHI", 0x0112, kind, 1) + struct.pack("<H", value) + b"\0\0"
    return b"II*\x00" + struct.pack("<I", ifd) + struct.pack("<H", 1) + entry + b"\0" * 4


@pytest.mark.filterwarnings("ignore:Corrupt EXIF")
@pytest.mark.parametrize("payload", [
    b"Exif\x00\x00" + _tiff_block(9),                  # value outside 1-8
    b"Exif\x00\x00" + _tiff_block(0),
    b"Exif\x00\x00" + _tiff_block(6, ifd=4000),        # first IFD past the block
    b"Exif\x00\x00" + _tiff_block(6, kind=4),          # LONG, not SHORT
    b"Exif\x00\x00" + _tiff_block(6)[:12],             # cut short inside the IFD
    b"Exif\x00\x00XX*\x00\x08\x00\x00\x00",            # no byte order mark
    b"Exif\x00\x00"])                                  # empty
def test_malformed_exif_is_ignored_as_pillow_and_libjpeg_do(payload):
    data = _jpeg_with_app1(payload)
    assert Image.open(io.BytesIO(data)).size == (W, H)  # still a readable JPEG
    assert exif_orientation(data) == 1


def test_a_hand_written_block_is_found_in_jpeg_and_webp():
    assert exif_orientation(_jpeg_with_app1(b"Exif\x00\x00" + _tiff_block(8))) == 8
    webp = _save("WEBP", None)
    block = _tiff_block(5)
    chunk = b"EXIF" + struct.pack("<I", len(block)) + block
    body = webp[12:] + chunk
    riff = b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body
    assert exif_orientation(riff) == 5
