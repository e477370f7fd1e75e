"""PNG colour-profile chunks left out before decoding (numpy only).

libpng prints a warning on stderr for a colour profile it finds wrong ("iCCP: known
incorrect sRGB profile", "iCCP: ... intent outside defined range", an sRGB chunk's
invalid rendering intent), naming no file, at every decode: every epoch, for every such
file, on both backends. Neither backend's decoder applies colour profiles (the pixels are
the stored values), so the chunks that carry them (iCCP, sRGB) are taken out of the bytes
before any decoder sees them, and nothing is printed; the pixels are the same.
"""
from __future__ import annotations

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
DROPPED = (b"iCCP", b"sRGB")  # colour-space chunks; both come before the image data
_DATA = (b"IDAT", b"IEND")


def without_profile_chunks(data: np.ndarray) -> np.ndarray:
    """`data` without its iCCP and sRGB chunks.

    Args:
        data: a whole PNG file as a uint8 array.

    Returns:
        `data` itself when it holds neither chunk (or is no PNG), else a new array. Chunks
        are walked up to the first IDAT, where the PNG specification puts both; a chunk
        list that runs past the end is left as it is, for the decoder to report.
    """
    spans = _profile_spans(data)
    if not spans:
        return data
    kept, start = [], 0
    for begin, end in spans:
        kept.append(data[start:begin])
        start = end
    kept.append(data[start:])
    return np.concatenate(kept)


def _profile_spans(data: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each iCCP / sRGB chunk before the image data."""
    if bytes(data[:8]) != SIGNATURE:
        return []
    spans, pos, n = [], 8, len(data)
    while pos + 8 <= n:
        length = int.from_bytes(bytes(data[pos:pos + 4]), "big")
        kind = bytes(data[pos + 4:pos + 8])
        end = pos + 12 + length  # length, type, data, CRC
        if kind in _DATA or end > n:
            break
        if kind in DROPPED:
            spans.append((pos, end))
        pos = end
    return spans
