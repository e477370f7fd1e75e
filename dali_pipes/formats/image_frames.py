"""The sizes of every frame of a multi-frame image, from its headers (no decoding).

A header's size is not all a decoder may allocate: a GIF frame may lie beyond the logical
screen (Pillow then grows the canvas to hold it), an APNG names each frame's size in its
fcTL chunk, a TIFF holds one IFD per page and an animated WebP one ANMF chunk per frame.
`frame_sizes` lists them so `image_kind.image_size` counts each against `max_pixels`. The
walks are bounded by the file's length (every step moves forward; a TIFF's IFD chain is
followed once per offset), so a malformed file ends them, never loops.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

_GIF_EXTENSION, _GIF_IMAGE, _GIF_TRAILER = 0x21, 0x2C, 0x3B


def frame_sizes(kind: str, raw: bytes) -> Iterator[tuple[int, int]]:
    """(height, width) of each frame of `raw` (for a GIF: the canvas grown to hold it),
    for the kinds that have frames; nothing for the others. struct.error / IndexError for
    a header cut short."""
    walk = _WALKS.get(kind)
    return iter(()) if walk is None else walk(raw)


def _gif(raw: bytes) -> Iterator[tuple[int, int]]:
    """The canvas after each image descriptor: the logical screen grown to the frame's
    far edge (top + height, left + width), as Pillow grows it; extensions and their
    sub-blocks skipped, a byte of no block passed over, as Pillow does."""
    canvas_w, canvas_h, flags = struct.unpack("<HHB", raw[6:11])
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while pos < len(raw):
        block = raw[pos]
        if block == _GIF_TRAILER:
            return
        if block == _GIF_EXTENSION:
            pos = _skip_sub_blocks(raw, pos + 2)
        elif block == _GIF_IMAGE:
            left, top, width, height, packed = struct.unpack("<HHHHB", raw[pos + 1:pos + 10])
            canvas_h, canvas_w = max(canvas_h, top + height), max(canvas_w, left + width)
            yield canvas_h, canvas_w
            pos += 10 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
            pos = _skip_sub_blocks(raw, pos + 1)  # after the LZW minimum code size
        else:
            pos += 1


def _skip_sub_blocks(raw: bytes, pos: int) -> int:
    """The position after a chain of GIF sub-blocks (each a size byte and its data) ending
    with a zero size, or the end of the data."""
    while pos < len(raw) and raw[pos]:
        pos += raw[pos] + 1
    return pos + 1


def _png(raw: bytes) -> Iterator[tuple[int, int]]:
    """Each APNG fcTL chunk's frame size (a plain PNG has none)."""
    if raw.find(b"fcTL") < 0:
        return
    pos = 8
    while pos + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        if kind == b"fcTL":
            width, height = struct.unpack(">II", raw[pos + 12:pos + 20])
            yield height, width
        if kind == b"IEND":
            return
        pos += 12 + length


def _tiff(raw: bytes) -> Iterator[tuple[int, int]]:
    """Each page's (IFD's) ImageLength and ImageWidth; each IFD offset is read once."""
    end = "<" if raw[:2] == b"II" else ">"
    ifd, seen = struct.unpack(end + "I", raw[4:8])[0], set()
    while ifd and ifd not in seen and ifd + 2 <= len(raw):
        seen.add(ifd)
        count = struct.unpack(end + "H", raw[ifd:ifd + 2])[0]
        found = {}
        for i in range(count):
            entry = raw[ifd + 2 + 12 * i:ifd + 14 + 12 * i]
            tag, kind, _, value = struct.unpack(end + "HHI4s", entry)
            if tag in (256, 257):
                found[tag] = struct.unpack(end + ("H" if kind == 3 else "I"),
                                           value[:2] if kind == 3 else value)[0]
        if len(found) == 2:
            yield found[257], found[256]
        ifd = struct.unpack(end + "I", raw[ifd + 2 + 12 * count:ifd + 6 + 12 * count])[0]


def _webp(raw: bytes) -> Iterator[tuple[int, int]]:
    """Each ANMF chunk's frame size (an animated WebP's frames)."""
    if raw[12:16] != b"VP8X":
        return
    pos = 12
    while pos + 8 <= len(raw):
        kind, length = raw[pos:pos + 4], struct.unpack("<I", raw[pos + 4:pos + 8])[0]
        if kind == b"ANMF":
            body = raw[pos + 8:pos + 20]
            width = int.from_bytes(body[6:9], "little") + 1
            height = int.from_bytes(body[9:12], "little") + 1
            yield height, width
        pos += 8 + length + (length & 1)


_WALKS = {"gif": _gif, "png": _png, "tiff": _tiff, "webp": _webp}

__all__ = ["frame_sizes"]
