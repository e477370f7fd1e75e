"""Random erasing parameters (torchvision's / timm's `RandomErasing`) as pure functions of
(seed, epoch, sample key) (numpy only).

Each sample is erased with probability `p`: up to 10 attempts of an area fraction drawn from
`scale` and a log-uniform aspect ratio from `ratio`; the first box that fits inside the image
wins (none fits: the sample is left as is). The fill is a constant or, with
`value="random"`, per-pixel standard normal noise (timm's mode "pixel") drawn from a
generator seeded by (seed, epoch, key, STREAM_ERASE), so both backends and a resumed loader
erase the same pixels with the same values.
"""
from __future__ import annotations

import math

import numpy as np

from dali_pipes.geometry.draws import uniforms

STREAM_ERASE = 7
ATTEMPTS = 10
_MASK = 0xFFFFFFFFFFFFFFFF


def erase_boxes(seed: int, epoch: int, keys: np.ndarray, height: int, width: int, *,
                p: float, scale: tuple[float, float], ratio: tuple[float, float]
                ) -> np.ndarray:
    """(B, 4) int64 boxes (top, left, height, width); height 0 where nothing is erased.

    Args:
        seed, epoch, keys: the loader's seed, the epoch and each sample's key.
        height, width: the output image size.
        p: the erasing probability.
        scale, ratio: area fraction and aspect ratio ranges.

    Returns:
        The boxes, vectorised over the batch.
    """
    u = uniforms(seed, epoch, keys, STREAM_ERASE, 1 + 4 * ATTEMPTS)
    apply = u[:, 0] < p
    u = u[:, 1:].reshape(-1, ATTEMPTS, 4)
    area = height * width * (scale[0] + u[..., 0] * (scale[1] - scale[0]))
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = np.exp(log_lo + u[..., 1] * (log_hi - log_lo))
    h = np.round(np.sqrt(area * aspect))
    w = np.round(np.sqrt(area / aspect))
    fits = (h > 0) & (h < height) & (w > 0) & (w < width)
    top = np.floor(u[..., 2] * (height - h + 1))
    left = np.floor(u[..., 3] * (width - w + 1))
    first = np.argmax(fits, axis=1)
    rows = np.arange(len(first))
    out = np.stack([top[rows, first], left[rows, first], h[rows, first], w[rows, first]],
                   axis=1)
    out[~(apply & fits.any(axis=1))] = 0
    return out.astype(np.int64)


def erase_noise(seed: int, epoch: int, key: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 standard normal noise of `shape` for the box of sample `key`."""
    rng = np.random.default_rng(np.random.SeedSequence(
        [seed & _MASK, epoch & _MASK, int(key) & _MASK, STREAM_ERASE]))
    return rng.standard_normal(shape, dtype=np.float32)
