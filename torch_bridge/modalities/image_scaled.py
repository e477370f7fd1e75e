"""Feeds of the reduced-scale image graph: JPEGs decoded at 1/2-1/8 of their size.

Used on DALI's CPU backend when the data's photos are large against the output size
(`scaled_decode_pays`): each crop window at least 2x the output is decoded at the largest
DCT scale that keeps it at least `size` pixels (dali_pipes.formats.jpeg_scale), in threads
(libjpeg-turbo runs without the GIL), and only the pixels holding the window go to DALI,
which resizes exactly the window and normalizes (dali_pipes.pipelines.image_scaled).
"""
from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dali_pipes.formats.jpeg_scale import dct_factors, decode_scaled, scaled_boxes

PROBED_FILES = 8
# Below this shorter side the feed's per-image Python work costs more than reduced-scale
# decoding saves (measured: 0.92x at 500x375, docs/speed.md).
MIN_SIDE = 512


def scaled_decode_pays(source, *, size: int, train: bool, device: str, enabled: bool
                       ) -> bool:
    """Whether to decode in the feed at reduced scale: on the CPU backend, with simplejpeg
    installed, when the median shorter side of up to PROBED_FILES files spread over the
    listing is at least 4x `size` in training (random crops cover 8-100% of the area) or
    2x in evaluation (the centre crop spans the shorter side), and at least MIN_SIDE.

    Args:
        source: an ImageFolderSource.
        size: output side.
        train: random resized crops (True) or centre crops.
        device: DALI device, "cpu" or "gpu" (nvJPEG has no DCT scaling: never there).
        enabled: the preset's `scaled_jpeg_decode`.

    Returns:
        True to build the reduced-scale graph.
    """
    if not enabled or device != "cpu" or importlib.util.find_spec("simplejpeg") is None:
        return False
    n = len(source)
    picks = sorted({round(i * (n - 1) / max(1, PROBED_FILES - 1)) for i in
                    range(min(n, PROBED_FILES))})
    sides = []
    for i in picks:
        try:
            _, (h, w) = source.read(i)
        except Exception:  # reported under on_error when the sample is read
            continue
        sides.append(min(h, w))
    need = max(MIN_SIDE, (4 if train else 2) * size)
    return bool(sides) and float(np.median(sides)) >= need


def decode_windows(datas: list, hw: np.ndarray, windows: np.ndarray, *, size: int,
                   paths: list[str], fast_idct: bool, threads: int
                   ) -> tuple[list, np.ndarray, np.ndarray]:
    """Decode each file at its window's scale and cut the pixels that hold the window.

    Args:
        datas: the files' bytes.
        hw: (B, 2) their (height, width).
        windows: (B, 4) crop windows in source pixels.
        size: output side.
        paths: file names, for errors.
        fast_idct: libjpeg-turbo's fast integer IDCT.
        threads: decoding threads.

    Returns:
        (per sample: uint8 (h, w, 3) pixels or the exception that stopped it,
        roi_start (B, 2), roi_end (B, 2) float32 of the window within those pixels).
    """
    factors = dct_factors(windows, size)
    boxes, start, end = scaled_boxes(windows, factors, hw)

    def one(i: int):
        try:
            pixels = decode_scaled(datas[i], int(factors[i]), (int(hw[i, 0]), int(hw[i, 1])),
                                   path=paths[i], fast_idct=fast_idct)
        except Exception as exc:  # the sample's failure, raised under on_error by feeds
            return exc
        y0, x0, y1, x1 = boxes[i].tolist()
        return np.ascontiguousarray(pixels[y0:y1, x0:x1])

    with ThreadPoolExecutor(max(1, threads)) as pool:
        return list(pool.map(one, range(len(datas)))), start, end
