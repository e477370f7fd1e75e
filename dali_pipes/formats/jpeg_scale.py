"""Reduced-scale JPEG decoding: libjpeg-turbo's DCT scaling (1/2, 1/4, 1/8), numpy out.

A JPEG decoder can produce the image at 1/2, 1/4 or 1/8 of its size by using only the
low-frequency DCT coefficients of each 8x8 block: the inverse DCT, chroma upsampling and
colour conversion then cost 4-64x less, and the resize after it has less to shrink. DALI
2.4's decoders and nvImageCodec 0.9 offer no such scaling (docs/speed.md), so the feed
decodes with simplejpeg (libjpeg-turbo's TurboJPEG API) and hands pixels to the graph.

Coordinates: pixel j of an image decoded at 1/f covers source pixels [j*f, (j+1)*f), so a
crop window (top, left, height, width) in source pixels is the window divided by f in the
decoded image, edges included; the decoded size is ceil(H / f) x ceil(W / f).
"""
from __future__ import annotations

import os

import numpy as np

from dali_pipes.formats.errors import FormatError

DCT_FACTORS = (2, 4, 8)


def dct_factors(windows: np.ndarray, size: int) -> np.ndarray:
    """The reduction of each crop window: the largest f in DCT_FACTORS whose window still
    covers at least `size` decoded pixels on its shorter side; 1 for windows under 2x size.

    Args:
        windows: (B, 4) int crop windows (top, left, height, width) in source pixels.
        size: output side the window is resized to.

    Returns:
        (B,) int32 factors in {1, 2, 4, 8}.
    """
    windows = np.asarray(windows)
    side = np.minimum(windows[:, 2], windows[:, 3])
    out = np.ones(len(windows), np.int32)
    for f in DCT_FACTORS:  # ascending: the last factor that fits wins
        out[side >= f * size] = f
    return out


def scaled_boxes(windows: np.ndarray, factors: np.ndarray, hw: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each window lies in its decoded image.

    Args:
        windows: (B, 4) crop windows in source pixels.
        factors: (B,) reductions from `dct_factors`.
        hw: (B, 2) source (height, width).

    Returns:
        boxes (B, 4) int64: whole decoded pixels (y0, x0, y1, x1) that hold the window,
        within the decoded image; roi_start, roi_end (B, 2) float32 (y, x): the window in
        coordinates of that box, for a resize with a region of interest.
    """
    f = np.asarray(factors, np.float64)[:, None]
    start = windows[:, :2] / f
    end = (windows[:, :2] + windows[:, 2:]) / f
    decoded = -(-np.asarray(hw, np.int64) // np.asarray(factors, np.int64)[:, None])
    low = np.floor(start).astype(np.int64)
    high = np.minimum(np.ceil(end).astype(np.int64), decoded)
    boxes = np.concatenate([low, high], axis=1)
    return boxes, (start - low).astype(np.float32), (end - low).astype(np.float32)


def decode_scaled(data, factor: int, hw: tuple[int, int], *, path: str | os.PathLike,
                  fast_idct: bool = True) -> np.ndarray:
    """Decode a JPEG at 1/`factor` of its size to (ceil(H/f), ceil(W/f), 3) uint8 RGB.

    Args:
        data: the whole file (bytes or a uint8 array).
        factor: 1, 2, 4 or 8.
        hw: the (height, width) of its frame header.
        path: named in errors.
        fast_idct: libjpeg-turbo's fast integer IDCT (as DALI's `use_fast_idct`).

    Returns:
        The decoded pixels; FormatError when libjpeg-turbo cannot decode the file.
    """
    import simplejpeg

    want = (-(-hw[0] // factor), -(-hw[1] // factor))
    try:
        pixels = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=fast_idct,
                                        min_height=want[0], min_width=want[1],
                                        min_factor=float(factor))
    except ValueError as exc:
        raise FormatError(path, "JPEG data", f"libjpeg-turbo could not decode it at 1/{factor}"
                          f": {exc}") from exc
    if pixels.shape[:2] != want:
        raise FormatError(path, "DCT scale", f"decoded at another scale than 1/{factor}",
                          value=pixels.shape[:2], expected=want)
    return pixels
