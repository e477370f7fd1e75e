"""Photometric augmentation parameters: colour jitter, random grayscale, gaussian blur, as
pure functions of (seed, epoch, sample key) (numpy only).

torchvision's ranges: brightness, contrast and saturation factors uniform in
[max(0, 1 - x), 1 + x], hue shift uniform in [-x, x] turns (x <= 0.5), grayscale with
probability p, blur with probability p and sigma uniform in `blur_sigma`. Unlike
torchvision's ColorJitter (which permutes the four adjustments per sample) the order is
fixed: brightness, contrast, saturation, hue, then grayscale, then blur; samples that draw
"no change" get identity parameters (factor 1, shift 0, sigma ~0), so one graph serves all.
"""
from __future__ import annotations

import numpy as np

from dali_pipes.geometry.draws import uniforms

STREAM_PHOTO = 8
NO_BLUR_SIGMA = 1e-6  # a gaussian this narrow is the identity on any window
JITTER = ("brightness", "contrast", "saturation", "hue")


def jitter_strengths(color_jitter) -> tuple[float, float, float, float]:
    """(brightness, contrast, saturation, hue) from a float (timm: the first three, no hue)
    or a 3- or 4-tuple."""
    if isinstance(color_jitter, (tuple, list)):
        if len(color_jitter) > 4:
            raise ValueError("color_jitter: expected a float or a 3- or 4-tuple, got "
                             f"{color_jitter!r}")
        vals = [float(v) for v in color_jitter] + [0.0] * (4 - len(color_jitter))
        return vals[0], vals[1], vals[2], vals[3]
    x = float(color_jitter)
    return x, x, x, 0.0


def photometric_params(seed: int, epoch: int, keys: np.ndarray, recipe
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample parameters under an `ImageRecipe`.

    Args:
        seed, epoch, keys: the loader's seed, the epoch and the samples' keys.
        recipe: the validated recipe (color_jitter, grayscale, blur, blur_sigma).

    Returns:
        (float32 (B, 5) rows [brightness, contrast, saturation, hue turns, grayscale 0/1],
        float32 (B,) blur sigmas, NO_BLUR_SIGMA where a sample is not blurred).
    """
    u = uniforms(seed, epoch, keys, STREAM_PHOTO, 7)
    b, c, s, h = recipe.photometric.color_jitter
    factors = [np.maximum(0.0, 1 - x) + u[:, i] * (1 + x - np.maximum(0.0, 1 - x))
               for i, x in enumerate((b, c, s))]
    hue = -h + u[:, 3] * 2 * h
    gray = (u[:, 4] < recipe.photometric.grayscale).astype(np.float64)
    lo, hi = recipe.photometric.blur_sigma
    sigma = np.where(u[:, 5] < recipe.photometric.blur, lo + u[:, 6] * (hi - lo), NO_BLUR_SIGMA)
    return (np.stack([*factors, hue, gray], axis=1).astype(np.float32),
            sigma.astype(np.float32))
