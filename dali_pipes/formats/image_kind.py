"""What image format a file's bytes hold, and its size, from the header (no decoding).

JPEG, PNG, GIF, BMP, TIFF, WebP and JPEG 2000 (a .jp2 file or a raw J2K codestream) are
told apart by their magic bytes, never by the file name. The size comes from the format's
header (PNG IHDR, GIF logical screen, BMP info header, the first TIFF IFD, WebP
VP8/VP8L/VP8X chunk, JPEG 2000 ihdr box or SIZ marker: `dali_pipes.formats.jpeg2000`);
JPEG goes through the stricter `dali_pipes.formats.jpeg_scan.jpeg_size`. PNG, GIF and JPEG 2000
are also checked for their end marker, so a truncated file fails here, naming the file,
before a decoder sees it. With `max_pixels`, every frame of a GIF (the canvas Pillow grows
to hold it), APNG, multi-page TIFF or animated WebP counts too (`image_frames`).
"""
from __future__ import annotations

import os
import struct

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_frames import frame_sizes
from dali_pipes.formats.jpeg import check_pixels
from dali_pipes.formats.jpeg2000 import (
    J2K_START,
    JP2_SIGNATURE,
    dali_decodes,
    j2k_size,
    jp2_size,
)
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.formats.png_chunks import without_profile_chunks

# File-name suffixes of image files (class folders; shard members without the dot): a file
# with one is a sample whose format is then recognised from its bytes, never from the suffix.
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".gif", ".tif",
                            ".tiff", ".webp", ".jp2", ".j2k", ".j2c", ".jpc", ".jpf"})
KINDS = ("jpeg", "png", "gif", "bmp", "tiff", "webp", "jp2", "j2k")
_PNG = b"\x89PNG\r\n\x1a\n"
_EXPECTED = "a JPEG, PNG, GIF, BMP, TIFF, WebP or JPEG 2000 image"


def image_kind(data) -> str | None:
    """The format of the encoded image `data` (one of KINDS), or None."""
    head = bytes(data[:16])
    if head.startswith(b"\xff\xd8"):
        return "jpeg"
    if head.startswith(_PNG):
        return "png"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head.startswith(b"BM") and len(head) >= 14:
        return "bmp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:12] == JP2_SIGNATURE:
        return "jp2"
    if head.startswith(J2K_START):
        return "j2k"
    return None


def image_size(data, path: str | os.PathLike = "<bytes>", *, max_pixels: int | None = None
               ) -> tuple[str, tuple[int, int]]:
    """(kind, (height, width)) of an encoded image; FormatError naming `path` and what was
    found for bytes of no known format, a header cut short, a zero size, or more pixels
    than `max_pixels` (None: no limit).

    Args:
        data: the whole file (bytes, bytearray, memoryview or a uint8 numpy array).
        path: what to name in errors.
        max_pixels: the decompression-bomb limit on height * width, checked from the header.

    Returns:
        The kind (one of KINDS) and the size in pixels.
    """
    kind = image_kind(data)
    if kind is None:
        found = "empty file" if len(data) == 0 else f"first bytes {bytes(data[:8])!r}"
        raise FormatError(path, "magic bytes", f"not an image ({found})", expected=_EXPECTED)
    if kind == "jpeg":
        return kind, jpeg_size(data, path, max_pixels=max_pixels)
    raw = bytes(data)
    try:
        h, w = _READERS[kind](raw, path)
    except (struct.error, IndexError) as exc:
        raise FormatError(path, f"{kind.upper()} header", "truncated header") from exc
    if h <= 0 or w <= 0:
        raise FormatError(path, f"{kind.upper()} size", "zero image size", value=(h, w),
                          expected="height and width > 0")
    check_pixels((h, w), path, max_pixels)
    if max_pixels is not None:
        _check_frames(kind, raw, path, max_pixels)
    return kind, (h, w)


def _check_frames(kind: str, raw: bytes, path, max_pixels: int) -> None:
    """Every frame of a multi-frame image (GIF, APNG, TIFF pages, animated WebP) counts
    against `max_pixels`, not only the header's size (`image_frames.frame_sizes`)."""
    try:
        for frame in frame_sizes(kind, raw):
            check_pixels(frame, path, max_pixels)
    except (struct.error, IndexError) as exc:
        raise FormatError(path, f"{kind.upper()} frames", "truncated frame header") from exc


def _png(raw: bytes, path) -> tuple[int, int]:
    if raw[12:16] != b"IHDR":
        raise FormatError(path, "PNG IHDR", "first chunk is not IHDR", value=raw[12:16])
    if raw[-8:-4] != b"IEND":
        raise FormatError(path, "PNG IEND", "truncated: no IEND chunk at the end",
                          expected="a complete PNG")
    w, h = struct.unpack(">II", raw[16:24])
    return h, w


def _gif(raw: bytes, path) -> tuple[int, int]:
    if not raw.rstrip(b"\x00").endswith(b";"):
        raise FormatError(path, "GIF trailer", "truncated: no trailer byte 0x3b at the end",
                          expected="a complete GIF")
    w, h = struct.unpack("<HH", raw[6:10])
    return h, w


def _bmp(raw: bytes, path) -> tuple[int, int]:
    _check_length(raw, path, "BMP file size", struct.unpack("<I", raw[2:6])[0])
    header = struct.unpack("<I", raw[14:18])[0]
    if header == 12:  # OS/2 BITMAPCOREHEADER
        w, h = struct.unpack("<HH", raw[18:22])
    else:
        w, h = struct.unpack("<ii", raw[18:26])
    return abs(h), w


def _tiff(raw: bytes, path) -> tuple[int, int]:
    end = "<" if raw[:2] == b"II" else ">"
    ifd = struct.unpack(end + "I", raw[4:8])[0]
    count = struct.unpack(end + "H", raw[ifd:ifd + 2])[0]
    found = {}
    for i in range(count):
        tag, kind, _, value = struct.unpack(end + "HHI4s", raw[ifd + 2 + 12 * i:ifd + 14 + 12 * i])
        if tag in (256, 257):
            found[tag] = struct.unpack(end + ("H" if kind == 3 else "I"),
                                       value[:2] if kind == 3 else value)[0]
    if len(found) < 2:
        raise FormatError(path, "TIFF IFD", "no ImageWidth/ImageLength tags in the first IFD")
    return found[257], found[256]


def _webp(raw: bytes, path) -> tuple[int, int]:
    _check_length(raw, path, "RIFF size", struct.unpack("<I", raw[4:8])[0] + 8)
    chunk = raw[12:16]
    if chunk == b"VP8 ":
        if raw[23:26] != b"\x9d\x01\x2a":
            raise FormatError(path, "WebP VP8 frame", "no key frame start code")
        w, h = struct.unpack("<HH", raw[26:30])
        return h & 0x3FFF, w & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(raw[21:25], "little")
        return ((bits >> 14) & 0x3FFF) + 1, (bits & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(raw[27:30], "little") + 1, int.from_bytes(raw[24:27], "little") + 1
    raise FormatError(path, "WebP chunk", "unknown first chunk", value=chunk,
                      expected="VP8, VP8L or VP8X")


def _check_length(raw: bytes, path, field: str, declared: int) -> None:
    if len(raw) < declared:
        raise FormatError(path, field, f"truncated: the header declares {declared} bytes, "
                          f"the file has {len(raw)}", expected="a complete file")


def prepare_image(data, path: str | os.PathLike = "<bytes>", *,
                  max_pixels: int | None = None):
    """(bytes to decode, (height, width)) of a checked image: the bytes as they are, or
    as a PNG written by Pillow where DALI 2.4's decoders cannot read the file: a GIF (its
    first frame; RGBA when the GIF has a transparent colour) and the JPEG 2000 files its
    CPU decoder refuses (`jpeg2000.dali_decodes`: a raw J2K codestream of one component,
    any file of two). Both backends then decode the same PNG. A PNG comes without its
    colour-profile chunks (`png_chunks`: libpng's warnings about them name no file).
    FormatError as `image_size`, or naming the file when Pillow cannot decode what it
    must convert.

    Args:
        data: the whole file as a uint8 numpy array.
        path: what to name in errors.
        max_pixels: as for `image_size`.

    Returns:
        A uint8 numpy array and the size in pixels.
    """
    kind, size = image_size(data, path, max_pixels=max_pixels)
    if kind == "gif":
        return _as_png(data, path, "GIF first frame")
    if kind in ("jp2", "j2k") and not dali_decodes(bytes(data[:256]), kind):
        return _as_png(data, path, "JPEG 2000 image")
    if kind == "png":
        return without_profile_chunks(data), size
    return data, size


def _as_png(data, path, field: str):
    """The image (a GIF's first frame) re-encoded losslessly as PNG, and its size."""
    import io

    import numpy as np
    from PIL import Image
    try:
        with Image.open(io.BytesIO(bytes(data))) as image:
            image.seek(0)
            if "transparency" in image.info:  # a transparent colour: alpha="keep" reads it
                image = image.convert("RGBA")
            elif image.mode not in ("L", "LA", "RGB", "RGBA", "I;16"):
                image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
            out = io.BytesIO()
            image.save(out, format="PNG", compress_level=1)
            frame = (image.height, image.width)
    except (OSError, ValueError, EOFError) as exc:
        raise FormatError(path, field, f"cannot be decoded ({exc})") from exc
    return np.frombuffer(out.getvalue(), dtype=np.uint8).copy(), frame


_READERS = {"png": _png, "gif": _gif, "bmp": _bmp, "tiff": _tiff, "webp": _webp,
            "jp2": jp2_size, "j2k": j2k_size}
