"""Cheap JPEG validation: markers, frame header dimensions, end of image (numpy only).

This is not a decoder. It reads the marker segments up to the first start-of-scan, which
is a few dozen bytes of Python work per file, and catches what a loader must not feed to a
decoder blindly: empty files, other formats, headers cut short, files truncated before
their end-of-image marker, and zero or missing dimensions.
"""
from __future__ import annotations

import os

from dali_pipes.formats.errors import FormatError

_SOI = b"\xff\xd8"
_EOI = b"\xff\xd9"
# Start-of-frame markers that carry the image size (all but DHT C4, JPG C8, DAC CC).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})
_SOS = 0xDA
_SIGNATURES = {b"\x89PNG": "PNG", b"GIF8": "GIF", b"BM": "BMP", b"RIFF": "RIFF/WebP",
               b"II*\x00": "TIFF", b"MM\x00*": "TIFF"}


def _sniff(data) -> str:
    head = bytes(data[:4])
    for magic, name in _SIGNATURES.items():
        if head.startswith(magic):
            return f"a {name} file"
    return f"first bytes {head!r}"


def jpeg_size(data, path: str | os.PathLike = "<bytes>") -> tuple[int, int]:
    """(height, width) from the frame header of a complete JPEG; FormatError otherwise.

    `data` is bytes, bytearray, memoryview or a uint8 numpy array of the whole file.
    """
    view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    if len(view) == 0:
        raise FormatError(path, "file size", "empty file", value=0, expected="a JPEG image")
    if bytes(view[:2]) != _SOI:
        raise FormatError(path, "SOI marker", f"not a JPEG file ({_sniff(view)})",
                          expected="FF D8")
    size, scan_at = _walk_markers(view, path)
    if size is None:
        raise FormatError(path, "SOF marker", "no frame header before the first scan")
    if size[0] == 0 or size[1] == 0:
        raise FormatError(path, "SOF dimensions", "zero image size", value=size,
                          expected="height and width > 0")
    if bytes(view).rfind(_EOI, scan_at) < 0:
        raise FormatError(path, "EOI marker", "truncated: no end-of-image marker after the "
                          "scan data", expected="FF D9 at the end of the file")
    return size


def _walk_markers(view, path) -> tuple[tuple[int, int] | None, int]:
    """Walk marker segments from after SOI to the first SOS; return (size, scan offset)."""
    pos, n, size = 2, len(view), None
    while pos + 4 <= n:
        if view[pos] != 0xFF:
            raise FormatError(path, f"marker at byte {pos}", "corrupt header: expected a "
                              "marker", value=hex(view[pos]), expected="0xff")
        marker = view[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        length = (view[pos + 2] << 8) | view[pos + 3]
        if length < 2 or pos + 2 + length > n:
            raise FormatError(path, f"segment 0x{marker:02x} length", "header segment runs "
                              "past the end of the file", value=length)
        if marker in _SOF:
            if length < 8 or length != 8 + 3 * view[pos + 9]:
                raise FormatError(path, "SOF length", "frame header length does not match "
                                  "its component count", value=length,
                                  expected=f"8 + 3 * {view[pos + 9]}")
            size = ((view[pos + 5] << 8) | view[pos + 6], (view[pos + 7] << 8) | view[pos + 8])
        elif marker == _SOS:
            return size, pos + 2 + length
        pos += 2 + length
    raise FormatError(path, "SOS marker", "truncated header: no start of scan",
                      expected="a complete JPEG")
