"""Cheap JPEG validation: markers, frame header, pixel budget, entropy-coded scans (numpy only).

This is not a decoder. It reads the marker segments up to the first start-of-scan (a few dozen
bytes of Python work per file); `dali_pipes.formats.jpeg_scan` checks the scans with
vectorised numpy over the bytes, and its `jpeg_size` runs both. They catch what a loader must
not feed to a decoder blindly: empty files, other formats, headers cut short, zero or missing
dimensions, images larger than a pixel budget (decompression bombs, refused before any pixel
is decoded), and scan data a decoder would silently patch with grey (markers that cannot occur
there, restart markers out of order or missing, an end-of-image marker in the middle, no end-
of-image).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from dali_pipes.formats.errors import FormatError

# PIL's Image.MAX_IMAGE_PIXELS: the default pixel budget of the image modality.
DEFAULT_MAX_PIXELS = 89_478_485

_SOI = b"\xff\xd8"
# Start-of-frame markers that carry the image size (all but DHT C4, JPG C8, DAC CC).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})
_SOS, _DRI = 0xDA, 0xDD
_SIGNATURES = {b"\x89PNG": "PNG", b"GIF8": "GIF", b"BM": "BMP", b"RIFF": "RIFF/WebP",
               b"II*\x00": "TIFF", b"MM\x00*": "TIFF"}


@dataclass(frozen=True)
class JpegHeader:
    """What the marker segments before the first scan say.

    `components`: (id, horizontal, vertical sampling factor) per frame component;
    `scan_components`: the component ids of the first scan; `scan_at`: the offset of its
    first entropy-coded byte; `restart_interval`: MCUs between restart markers (0: none).
    """

    height: int
    width: int
    sof: int
    components: tuple[tuple[int, int, int], ...]
    restart_interval: int
    scan_components: tuple[int, ...]
    scan_at: int

    @property
    def size(self) -> tuple[int, int]:
        return self.height, self.width


def _sniff(data) -> str:
    head = bytes(data[:4])
    for magic, name in _SIGNATURES.items():
        if head.startswith(magic):
            return f"a {name} file"
    return f"first bytes {head!r}"


def as_view(data) -> memoryview | bytes | bytearray:
    return data if isinstance(data, (bytes, bytearray)) else memoryview(data).cast("B")


def check_pixels(size: tuple[int, int], path, max_pixels: int | None) -> None:
    """FormatError naming the file and the size when height * width exceeds `max_pixels`."""
    if max_pixels is not None and size[0] * size[1] > max_pixels:
        raise FormatError(path, "pixel count", f"{size[1]}x{size[0]} image exceeds the "
                          "max_pixels limit (a decompression bomb?)",
                          value=size[0] * size[1], expected=f"<= {max_pixels}")


def read_header(data, path: str | os.PathLike = "<bytes>") -> JpegHeader:
    """The validated header of a JPEG up to its first scan (FormatError naming the field)."""
    view = as_view(data)
    if len(view) == 0:
        raise FormatError(path, "file size", "empty file", value=0, expected="a JPEG image")
    if bytes(view[:2]) != _SOI:
        raise FormatError(path, "SOI marker", f"not a JPEG file ({_sniff(view)})",
                          expected="FF D8")
    return _walk_markers(view, path)


def _walk_markers(view, path) -> JpegHeader:
    """Walk marker segments from after SOI to the first SOS."""
    pos, n, frame, interval = 2, len(view), None, 0
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
        segment = bytes(view[pos + 4:pos + 2 + length])
        if marker in _SOF:
            frame = _frame(segment, marker, length, path)
        elif marker == _DRI:
            interval = restart_interval(segment, path)
        elif marker == _SOS:
            return _header(frame, interval, segment, pos + 2 + length, path)
        pos += 2 + length
    raise FormatError(path, "SOS marker", "truncated header: no start of scan",
                      expected="a complete JPEG")


def _frame(segment: bytes, marker: int, length: int, path):
    count = segment[5] if len(segment) > 5 else 0
    if length < 8 or length != 8 + 3 * count:
        raise FormatError(path, "SOF length", "frame header length does not match its "
                          "component count", value=length, expected=f"8 + 3 * {count}")
    comps = tuple((segment[6 + 3 * k], segment[7 + 3 * k] >> 4, segment[7 + 3 * k] & 15)
                  for k in range(count))
    if any(not 1 <= h <= 4 or not 1 <= v <= 4 for _, h, v in comps):
        raise FormatError(path, "SOF sampling factors", "outside 1..4",
                          value=[(h, v) for _, h, v in comps], expected="1 to 4")
    return marker, (segment[1] << 8) | segment[2], (segment[3] << 8) | segment[4], comps


def restart_interval(segment: bytes, path) -> int:
    """The restart interval of a DRI segment's payload (FormatError if it is not 2 bytes)."""
    if len(segment) != 2:
        raise FormatError(path, "DRI length", "restart interval segment must hold 2 bytes",
                          value=len(segment) + 2, expected=4)
    return (segment[0] << 8) | segment[1]


def scan_components(segment: bytes, path) -> tuple[int, ...]:
    """Component ids of an SOS segment's payload (FormatError when its length is wrong)."""
    count = segment[0] if segment else 0
    if count < 1 or len(segment) != 4 + 2 * count:
        raise FormatError(path, "SOS length", "scan header length does not match its "
                          "component count", value=len(segment) + 2,
                          expected=f"6 + 2 * {count}")
    return tuple(segment[1 + 2 * k] for k in range(count))


def _header(frame, interval: int, sos: bytes, scan_at: int, path) -> JpegHeader:
    if frame is None:
        raise FormatError(path, "SOF marker", "no frame header before the first scan")
    marker, height, width, comps = frame
    if height == 0 or width == 0:
        raise FormatError(path, "SOF dimensions", "zero image size", value=(height, width),
                          expected="height and width > 0")
    return JpegHeader(height, width, marker, comps, interval, scan_components(sos, path),
                      scan_at)
