"""Structural check of a JPEG's entropy-coded scans, vectorised with numpy over the bytes.

Inside entropy-coded data a 0xFF byte is always followed by 0x00 (a stuffed byte) or by a
restart marker RST0-7 (D0-D7), which must come in the order D0, D1, ..., D7, D0, ... from the
start of each scan; a decoder meets any other marker only where the scan ends. So one numpy
pass finds every "FF xx" with xx not 00 or FF (fill), and a short walk over the few non-restart
markers checks the file's structure:

* every scan ends in a marker that may follow a scan: EOI, or the segments allowed between
  scans (DHT, DAC, DQT, DRI, DNL, COM, APPn) leading to the next SOS;
* restart markers are in sequence, and with a restart interval (DRI) a scan holds exactly
  ceil(MCUs / interval) - 1 of them (fewer: cut off; more: garbage) for the DCT-based frames;
* the end-of-image marker exists, and is not followed by more data ending in another FF D9
  (an EOI in the middle of the scan, which decoders stop at) unless that data starts a second
  image (FF D8, as multi-picture files append).

What it cannot see: scan data cut short or overwritten without leaving a marker behind (no
restart interval, garbage holding no 0xFF byte). Only decoding finds those (`python -m
torch_bridge.tools.check --decode`); docs/failure_modes.md lists both cases.
"""
from __future__ import annotations

import math
import os

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.jpeg import (
    JpegHeader,
    as_view,
    check_pixels,
    read_header,
    restart_interval,
    scan_components,
)

_EOI, _SOS, _DRI = 0xD9, 0xDA, 0xDD
_RST = np.arange(0xD0, 0xD8)
# Segments that may sit between two scans: DHT, DAC, DQT, DNL, DRI, COM, APP0-15.
_BETWEEN = frozenset({0xC4, 0xCC, 0xDB, 0xDC, _DRI, 0xFE, *range(0xE0, 0xF0)})
# Frames whose MCU count follows from the frame header (baseline, extended, progressive).
_COUNTED = frozenset({0xC0, 0xC1, 0xC2, 0xC9, 0xCA})


def check_scans(data, header: JpegHeader, path) -> None:
    """FormatError (field "scan data", "restart markers" or "EOI marker") when the scans of
    a JPEG whose header is `header` are structurally broken; None when they look sound."""
    arr = np.frombuffer(data, dtype=np.uint8)
    pos, codes = _markers(arr, header.scan_at)
    i, scan_at = 0, header.scan_at
    interval, comps = header.restart_interval, header.scan_components
    while True:
        i = int(np.searchsorted(pos, scan_at))
        j = _first_non_rst(codes, i)
        if j == len(pos):
            raise FormatError(path, "EOI marker", "truncated: no end-of-image marker after "
                              "the scan data", expected="FF D9 at the end of the file")
        trailing = j > i and pos[j] - pos[j - 1] == 2  # a restart marker right at the end
        _check_restarts(codes[i:j], header, interval, comps, scan_at, path, trailing)
        at, code = int(pos[j]), int(codes[j])
        if code == _EOI:
            return _check_trailing(arr, at, path)
        if code not in _BETWEEN and code != _SOS:
            raise FormatError(path, "scan data", f"marker 0x{code:02x} at byte {at} cannot "
                              "occur in or after entropy-coded data (corrupt scan)",
                              value=f"FF {code:02X}", expected="RST0-7, EOI or a segment "
                              "between scans")
        step = _between_scans(arr, at, interval, path)
        if step is None:  # EOI reached through the segments
            return None
        scan_at, interval, comps = step


def _markers(arr: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, codes) of every FF xx from `start` on with xx not 00 (stuffing) or FF."""
    ff = np.flatnonzero(arr[start:-1] == 0xFF) + start
    nxt = arr[ff + 1]
    keep = (nxt != 0x00) & (nxt != 0xFF)
    return ff[keep], nxt[keep]


def _first_non_rst(codes: np.ndarray, i: int) -> int:
    other = np.flatnonzero((codes[i:] < 0xD0) | (codes[i:] > 0xD7))
    return i + int(other[0]) if len(other) else len(codes)


def _check_restarts(rst: np.ndarray, header: JpegHeader, interval: int, comps, at: int,
                    path, trailing: bool = False) -> None:
    """The restart markers of one scan: in sequence, and as many as the interval needs (one
    more is tolerated when it is `trailing`: right before the scan's end, as some encoders
    write it and decoders accept)."""
    if len(rst) == 0 and interval == 0:
        return
    if interval == 0:
        raise FormatError(path, "restart markers", f"{len(rst)} restart markers in the scan "
                          f"at byte {at} without a restart interval (DRI)", value=len(rst),
                          expected=0)
    wrong = np.flatnonzero(rst != _RST[np.arange(len(rst)) % 8])
    if len(wrong):
        k = int(wrong[0])
        raise FormatError(path, "restart markers", f"restart marker {k} of the scan at byte "
                          f"{at} is out of sequence (corrupt scan)", value=f"FF {rst[k]:02X}",
                          expected=f"FF {0xD0 + k % 8:02X}")
    if header.sof in _COUNTED:
        expected = math.ceil(_mcus(header, comps, path) / interval) - 1
        if len(rst) != expected and not (trailing and len(rst) == expected + 1):
            what = "cut off" if len(rst) < expected else "garbage"
            raise FormatError(path, "restart markers", f"the scan at byte {at} holds "
                              f"{len(rst)} restart markers ({what})", value=len(rst),
                              expected=expected)


def _mcus(header: JpegHeader, comps, path) -> int:
    """MCUs of a scan over `comps` (component ids): interleaved, or one component's blocks."""
    hmax = max(h for _, h, _ in header.components)
    vmax = max(v for _, _, v in header.components)
    if len(comps) > 1:
        return math.ceil(header.width / (8 * hmax)) * math.ceil(header.height / (8 * vmax))
    found = [(h, v) for cid, h, v in header.components if cid == comps[0]]
    if not found:
        raise FormatError(path, "SOS components", "the scan names a component the frame "
                          "does not have", value=comps[0],
                          expected=[cid for cid, _, _ in header.components])
    h, v = found[0]
    width = math.ceil(header.width * h / hmax)
    height = math.ceil(header.height * v / vmax)
    return math.ceil(width / 8) * math.ceil(height / 8)


def _between_scans(arr: np.ndarray, at: int, interval: int, path):
    """Walk the segments after a scan: (next scan's data offset, interval, components), or
    None at EOI."""
    n = len(arr)
    while at + 1 < n:
        if arr[at] != 0xFF:
            raise FormatError(path, "scan data", f"expected a marker at byte {at} between "
                              "scans (corrupt scan)", value=hex(int(arr[at])),
                              expected="0xff")
        code = int(arr[at + 1])
        if code == 0xFF:
            at += 1
            continue
        if code == _EOI:
            _check_trailing(arr, at, path)
            return None
        if code not in _BETWEEN and code != _SOS or at + 4 > n:
            raise FormatError(path, "scan data", f"marker 0x{code:02x} at byte {at} cannot "
                              "occur between scans (corrupt scan)", value=f"FF {code:02X}")
        length = (int(arr[at + 2]) << 8) | int(arr[at + 3])
        if length < 2 or at + 2 + length > n:
            raise FormatError(path, "scan data", f"segment 0x{code:02x} at byte {at} between "
                              "scans runs past the end of the file (corrupt scan)",
                              value=length)
        payload = arr[at + 4:at + 2 + length].tobytes()
        if code == _DRI:
            interval = restart_interval(payload, path)
        elif code == _SOS:
            return at + 2 + length, interval, scan_components(payload, path)
        at += 2 + length
    raise FormatError(path, "EOI marker", "truncated: no end-of-image marker after the scan "
                      "data", expected="FF D9 at the end of the file")


def _check_trailing(arr: np.ndarray, eoi: int, path) -> None:
    """Bytes after the EOI are allowed (padding, an appended video or second image) unless
    they themselves end in FF D9 (zero padding aside) without starting an image: then the
    first EOI sits inside the scan data and cut it short."""
    rest = arr[eoi + 2:]
    nonzero = np.flatnonzero(rest)
    if len(nonzero) == 0 or nonzero[-1] < 1:
        return
    end = int(nonzero[-1]) + 1
    if end % 2 == 0 and (rest[:end:2] == 0xFF).all() and (rest[1:end:2] == _EOI).all():
        return  # EOI written twice (or more): nothing was cut
    if rest[end - 2] == 0xFF and rest[end - 1] == _EOI and not (
            rest[0] == 0xFF and rest[1] == 0xD8):
        raise FormatError(path, "EOI marker", f"end-of-image marker at byte {eoi} is "
                          f"followed by {len(rest)} bytes ending in another FF D9 (an EOI "
                          "inside the scan data: corrupt scan)", value=eoi,
                          expected="one EOI, at the end of the scans")


def jpeg_size(data, path: str | os.PathLike = "<bytes>", *,
              max_pixels: int | None = None) -> tuple[int, int]:
    """(height, width) of a complete, structurally sound JPEG; FormatError otherwise.

    Args:
        data: bytes, bytearray, memoryview or a uint8 numpy array of the whole file.
        path: the file named in errors.
        max_pixels: refuse (FormatError, field "pixel count") an image whose frame header
            claims more than this many pixels, before its scan is looked at; None: no limit.

    Returns:
        (height, width) from the frame header, after the scan check of `check_scans`.
    """
    view = as_view(data)
    header = read_header(view, path)
    check_pixels(header.size, path, max_pixels)
    check_scans(view, header, path)
    return header.size
