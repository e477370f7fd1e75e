"""JPEG 2000 headers: the size of a .jp2 file (box structure, `ihdr`) or of a raw J2K
codestream (`SIZ` marker), read without decoding (numpy only).

A .jp2 file is a sequence of boxes (length, type, payload; ISO/IEC 15444-1 annex I): the
signature box, `ftyp`, the `jp2h` header box holding `ihdr` (height, width, components)
and the `jp2c` box holding the codestream. A raw codestream starts with SOC (FF4F) and SIZ
(FF51, whose fields give the reference grid and the image offset) and ends with EOC (FFD9).
Both are checked for being complete (every box inside the file, the codestream ending in
EOC), so a truncated file fails here, naming the file and the field.
"""
from __future__ import annotations

import struct

from dali_pipes.formats.errors import FormatError

JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
J2K_START = b"\xff\x4f\xff\x51"  # SOC then SIZ
_EOC = b"\xff\xd9"


def jp2_size(raw: bytes, path) -> tuple[int, int]:
    """(height, width) from a .jp2 file's `ihdr` box; FormatError naming `path` and the
    box for a box running past the end, no `jp2h`/`ihdr`, or a codestream cut short."""
    boxes = dict(_boxes(raw, 0, len(raw), path, "JP2"))
    if b"jp2h" not in boxes:
        raise FormatError(path, "JP2 jp2h box", "no header box", expected="a jp2h box")
    start, end = boxes[b"jp2h"]
    inner = dict(_boxes(raw, start, end, path, "JP2 jp2h"))
    if b"ihdr" not in inner or inner[b"ihdr"][1] - inner[b"ihdr"][0] < 14:
        raise FormatError(path, "JP2 ihdr box", "missing or shorter than 14 bytes")
    h, w = struct.unpack(">II", raw[inner[b"ihdr"][0]:inner[b"ihdr"][0] + 8])
    if b"jp2c" not in boxes:
        raise FormatError(path, "JP2 jp2c box", "no codestream box",
                          expected="a jp2c box after jp2h")
    cs_start, cs_end = boxes[b"jp2c"]
    _codestream_end(raw[cs_start:cs_end], path, "JP2 jp2c codestream")
    return h, w


def j2k_size(raw: bytes, path) -> tuple[int, int]:
    """(height, width) of a raw JPEG 2000 codestream from its SIZ marker (Xsiz - XOsiz,
    Ysiz - YOsiz); FormatError naming `path` for a SIZ cut short or no EOC at the end."""
    if len(raw) < 4 + 2 + 2 + 16:
        raise FormatError(path, "J2K SIZ marker", "truncated header")
    xsiz, ysiz, xo, yo = struct.unpack(">IIII", raw[8:24])
    _codestream_end(raw, path, "J2K codestream")
    return ysiz - yo, xsiz - xo


def components(head: bytes, kind: str) -> int | None:
    """The number of components (channels) a checked JPEG 2000 file declares: `ihdr`'s NC
    (.jp2, `kind` "jp2") or SIZ's Csiz (raw codestream, "j2k"); None when `head` (the
    first bytes of the file) does not reach it."""
    if kind == "j2k":
        return struct.unpack(">H", head[40:42])[0] if len(head) >= 42 else None
    at = head.find(b"ihdr")
    return struct.unpack(">H", head[at + 12:at + 14])[0] if 0 <= at <= len(head) - 14 \
        else None


def dali_decodes(head: bytes, kind: str) -> bool:
    """Whether DALI 2.4's CPU decoder (OpenJPEG through nvImageCodec) reads this file as
    RGB: .jp2 files of 1, 3 or 4 components and raw codestreams of 3 or 4; it fails on a
    raw codestream of one component and on two (gray + alpha) in either."""
    n = components(head, kind)
    return n in (3, 4) or (n == 1 and kind == "jp2")


def _boxes(raw: bytes, start: int, end: int, path, where: str):
    """(type, (payload start, payload end)) of each box in raw[start:end]."""
    pos = start
    while pos < end:
        if end - pos < 8:
            raise FormatError(path, f"{where} box at byte {pos}", "truncated box header")
        length, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        header = 8
        if length == 1:  # 64-bit length follows the type
            if end - pos < 16:
                raise FormatError(path, f"{where} box {kind!r}", "truncated box header")
            length, header = struct.unpack(">Q", raw[pos + 8:pos + 16])[0], 16
        elif length == 0:  # the box runs to the end
            length = end - pos
        if length < header or pos + length > end:
            raise FormatError(path, f"{where} box {kind!r}",
                              f"truncated: the box declares {length} bytes at byte {pos}, "
                              f"{end - pos} are left", expected="a complete file")
        yield kind, (pos + header, pos + length)
        pos += length


def _codestream_end(codestream: bytes, path, field: str) -> None:
    if not codestream.startswith(b"\xff\x4f") or not codestream.rstrip(b"\x00").endswith(_EOC):
        raise FormatError(path, field, "truncated: no EOC marker (FFD9) at the end"
                          if codestream.startswith(b"\xff\x4f") else "no SOC marker (FF4F)",
                          expected="a complete JPEG 2000 codestream")
