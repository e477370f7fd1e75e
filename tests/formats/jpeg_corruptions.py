"""Real JPEGs (PIL-encoded) and the ways tests corrupt them: shared by the format, loader
and check tests."""
import io

import numpy as np
from PIL import Image

from dali_pipes.formats.jpeg import read_header
from dali_pipes.sample_data.sample_images import photo_like

PIXELS = photo_like(np.random.default_rng(0), 75, 100)


def encode(pixels=PIXELS, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90, **options)
    return out.getvalue()


def _scan(data: bytes) -> int:
    return read_header(data).scan_at


def cut_with_eoi(data: bytes) -> bytes:
    at = _scan(data)
    return data[:at + (len(data) - at) * 3 // 5] + b"\xff\xd9"


def garbage_with_ff(data: bytes) -> bytes:
    """Random bytes over the middle of the scan (as a bad disk sector would leave)."""
    at, out = _scan(data), bytearray(data)
    mid = at + (len(data) - at) // 2
    noise = np.random.default_rng(1).integers(0, 256, 1024, dtype=np.uint8)
    noise[::97] = 0xFF  # a sector of random bytes holds about 4 of them per KB
    out[mid:mid + 1024] = noise.tobytes()
    return bytes(out)


def swap_restart(data: bytes) -> bytes:
    out = bytearray(data)
    first = out.index(b"\xff\xd0", _scan(data))
    out[first + 1] = 0xD3
    return bytes(out)


def eoi_inside(data: bytes) -> bytes:
    at, out = _scan(data), bytearray(data)
    mid = at + (len(data) - at) // 2
    out[mid:mid + 2] = b"\xff\xd9"
    return bytes(out)


def sof_inside(data: bytes) -> bytes:
    at, out = _scan(data), bytearray(data)
    mid = at + (len(data) - at) // 2
    out[mid:mid + 2] = b"\xff\xc0"
    return bytes(out)


def bomb(height: int, width: int) -> bytes:
    """A small real JPEG whose frame header claims height x width."""
    out = bytearray(encode())
    sof = out.index(b"\xff\xc0")
    out[sof + 5:sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(out)


