"""The EXIF Orientation tag (0x0112) of an encoded image, read from its bytes, and the
pure functions that apply it (numpy only).

Where the tag lives: JPEG in an APP1 "Exif" segment before the scan, PNG in an `eXIf`
chunk, WebP in an `EXIF` chunk, TIFF in its own first IFD; each holds (or is) a TIFF
structure whose first IFD may carry Orientation. JPEG 2000, BMP and GIF have none.

Values 1-8 follow the TIFF/EXIF specification: 1 is upright, 2-4 flip or turn the image
in its own plane, 5-8 also transpose it, so the displayed height and width swap. Anything
else (no EXIF, a cut-short or malformed EXIF block, a value outside 1-8) reads as 1, as
libjpeg-turbo's and Pillow's `exif_transpose` ignore it: a broken tag never makes a
sample fail.
"""
from __future__ import annotations

import struct

import numpy as np

ORIENTATION_TAG = 0x0112
# orientation -> (transpose first, then reverse rows, reverse columns)
_STEPS = {1: (False, False, False), 2: (False, False, True), 3: (False, True, True),
          4: (False, True, False), 5: (True, False, False), 6: (True, False, True),
          7: (True, True, True), 8: (True, True, False)}


def orientation_steps(orientation: int) -> tuple[bool, bool, bool]:
    """(transpose, reverse rows, reverse columns) that display an image stored with
    `orientation` upright, applied in this order; 1 for a value outside 1-8."""
    return _STEPS.get(orientation, _STEPS[1])


def inverse_orientation(orientation: int) -> int:
    """The orientation whose steps undo `orientation`'s (6 and 8 swap, the rest are their
    own inverse; 1 for a value outside 1-8)."""
    return {6: 8, 8: 6}.get(orientation, orientation if orientation in _STEPS else 1)


def oriented_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    """The displayed (height, width) of an image stored as `size` with `orientation`."""
    return (size[1], size[0]) if orientation_steps(orientation)[0] else size


def orient_array(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """`pixels` (H, W, ...) as displayed: the same result as PIL's `exif_transpose` (a view
    where numpy allows it)."""
    transpose, rows, cols = orientation_steps(orientation)
    if transpose:
        pixels = np.swapaxes(pixels, 0, 1)
    if rows:
        pixels = pixels[::-1]
    if cols:
        pixels = pixels[:, ::-1]
    return pixels


def exif_orientation(data) -> int:
    """The Orientation tag (1-8) of the encoded image `data` (bytes or a uint8 array);
    1 when there is none or the EXIF block is malformed (see the module docstring)."""
    view = memoryview(data).cast("B")
    reader = _FINDERS.get(bytes(view[:2])) or _FINDERS.get(bytes(view[:4]))
    if reader is None:
        return 1
    try:
        block = reader(view)
        value = _tiff_orientation(block) if block is not None else 1
    except (struct.error, IndexError, ValueError, TypeError):
        return 1
    return value if value in _STEPS else 1


def _jpeg_block(data) -> bytes | None:
    """The TIFF structure in the first APP1 "Exif" segment before the scan."""
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xDA or marker == 0xD9:  # start of scan, end of image
            return None
        length = struct.unpack(">H", bytes(data[pos + 2:pos + 4]))[0]
        if marker == 0xE1 and bytes(data[pos + 4:pos + 10]) == b"Exif\x00\x00":
            return bytes(data[pos + 10:pos + 2 + length])
        pos += 2 + length
    return None


def _png_block(data) -> bytes | None:
    """The payload of the `eXIf` chunk."""
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", bytes(data[pos:pos + 8]))
        if kind == b"eXIf":
            return bytes(data[pos + 8:pos + 8 + length])
        if kind == b"IEND":
            return None
        pos += 12 + length
    return None


def _webp_block(data) -> bytes | None:
    """The payload of the `EXIF` chunk (some writers keep the JPEG "Exif" prefix)."""
    if bytes(data[8:12]) != b"WEBP":
        return None
    pos = 12
    while pos + 8 <= len(data):
        kind, length = struct.unpack("<4sI", bytes(data[pos:pos + 8]))
        if kind == b"EXIF":
            block = bytes(data[pos + 8:pos + 8 + length])
            return block[6:] if block.startswith(b"Exif\x00\x00") else block
        pos += 8 + length + (length & 1)
    return None


def _tiff_orientation(block) -> int:
    """Orientation from the first IFD of a TIFF structure (1 when absent)."""
    order = {b"II": "<", b"MM": ">"}.get(bytes(block[:2]))
    if order is None or struct.unpack(order + "H", block[2:4])[0] != 42:
        return 1
    ifd = struct.unpack(order + "I", block[4:8])[0]
    count = struct.unpack(order + "H", block[ifd:ifd + 2])[0]
    for i in range(count):
        entry = block[ifd + 2 + 12 * i:ifd + 14 + 12 * i]
        tag, kind, n = struct.unpack(order + "HHI", entry[:8])
        if tag == ORIENTATION_TAG:
            return struct.unpack(order + "H", entry[8:10])[0] if kind == 3 and n == 1 else 1
    return 1


def _tiff_file_block(data):
    return data  # a TIFF file is its own TIFF structure


_FINDERS = {b"\xff\xd8": _jpeg_block, b"\x89P": _png_block, b"RIFF": _webp_block,
            b"II*\x00": _tiff_file_block, b"MM\x00*": _tiff_file_block}
