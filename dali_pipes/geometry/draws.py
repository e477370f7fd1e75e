"""Per-sample augmentation parameters as pure functions of (seed, epoch, index) (numpy only).

Nothing here depends on threads, workers or the backend: the same (seed, epoch, index) and
image size give the same crop window and flip on the DALI and the torch path. Randomness
comes from a counter-based hash (splitmix64), so a batch of parameters is computed with a
few vectorised numpy operations and no random state is shared or carried. The loaders pass
the plan's augmentation key as `index` (torch_bridge.order.plan): the dataset index for a sample's
first draw in an epoch, index + draw * len(dataset) for a repeat.
"""
from __future__ import annotations

import math

import numpy as np

_MASK = 0xFFFFFFFFFFFFFFFF
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# Streams keep the random numbers of different parameters independent.
STREAM_CROP = 1
STREAM_FLIP = 2
STREAM_CLIP = 3
STREAM_PATCH = 4
STREAM_VFLIP = 5
STREAM_MIX = 6  # batch mixing: drawn per (seed, epoch, batch position), not per sample
STREAM_CLIP_CROP = 12  # video clips: one spatial crop offset per clip (geometry.clip_crops)

CROP_ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 windows before falling back
EVAL_CROP_FRACTION = 0.875  # resize shorter side to size / 0.875 (256 for 224), crop the centre


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective, well-mixed hash of uint64 values."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def uniforms(seed: int, epoch: int, index: np.ndarray, stream: int, count: int) -> np.ndarray:
    """(len(index), count) float64 uniforms in [0, 1), a pure function of all arguments."""
    key = _mix(np.array([seed & _MASK], dtype=np.uint64))
    key = _mix(key ^ np.uint64(epoch & _MASK))
    key = _mix(key ^ np.uint64(stream))
    idx = np.asarray(index, dtype=np.int64).astype(np.uint64)[:, None]
    counter = np.arange(count, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        bits = _mix(_mix(key ^ (idx * _GOLDEN)) + counter * _GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def flips(seed: int, epoch: int, index: np.ndarray, p: float = 0.5) -> np.ndarray:
    """(B,) bool: horizontal flip for each sample."""
    return uniforms(seed, epoch, index, STREAM_FLIP, 1)[:, 0] < p


def random_resized_crop(seed: int, epoch: int, index: np.ndarray, heights: np.ndarray,
                        widths: np.ndarray, scale: tuple[float, float] = (0.08, 1.0),
                        ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> np.ndarray:
    """(B, 4) int64 windows (top, left, height, width) with torchvision's semantics.

    Like `RandomResizedCrop.get_params`: up to 10 attempts of an area fraction drawn from
    `scale` and a log-uniform aspect ratio from `ratio`; the first window that fits wins;
    otherwise a centre crop clamped to `ratio`.
    """
    H = np.asarray(heights, dtype=np.float64)[:, None]
    W = np.asarray(widths, dtype=np.float64)[:, None]
    u = uniforms(seed, epoch, index, STREAM_CROP, 4 * CROP_ATTEMPTS).reshape(-1, CROP_ATTEMPTS, 4)
    area = H * W * (scale[0] + u[..., 0] * (scale[1] - scale[0]))
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = np.exp(log_lo + u[..., 1] * (log_hi - log_lo))
    w = np.round(np.sqrt(area * aspect))
    h = np.round(np.sqrt(area / aspect))
    fits = (w > 0) & (w <= W) & (h > 0) & (h <= H)
    top = np.floor(u[..., 2] * (H - h + 1))
    left = np.floor(u[..., 3] * (W - w + 1))
    first = np.argmax(fits, axis=1)
    rows = np.arange(len(first))
    out = np.stack([top[rows, first], left[rows, first], h[rows, first], w[rows, first]], axis=1)
    fallback = ~fits.any(axis=1)
    if fallback.any():
        out[fallback] = _fallback_crop(H[fallback, 0], W[fallback, 0], ratio)
    return out.astype(np.int64)


def _fallback_crop(H: np.ndarray, W: np.ndarray, ratio: tuple[float, float]) -> np.ndarray:
    in_ratio = W / H
    w = np.where(in_ratio > max(ratio), np.round(H * max(ratio)), W)
    h = np.where(in_ratio < min(ratio), np.round(W / min(ratio)), H)
    return np.stack([(H - h) // 2, (W - w) // 2, h, w], axis=1)


def center_crop(heights: np.ndarray, widths: np.ndarray, size: int,
                crop_fraction: float = EVAL_CROP_FRACTION) -> np.ndarray:
    """(B, 4) windows equal to "resize shorter side to size/crop_fraction, centre crop size".

    Expressed in the original image's pixels, so eval decoding can use the same
    region-of-interest decode and resize as training.
    """
    H = np.asarray(heights, dtype=np.float64)
    W = np.asarray(widths, dtype=np.float64)
    resize_to = int(size / crop_fraction)
    side = np.minimum(np.round(np.minimum(H, W) * size / resize_to), np.minimum(H, W))
    side = np.maximum(side, 1)
    top = np.round((H - side) / 2.0)
    left = np.round((W - side) / 2.0)
    return np.stack([top, left, side, side], axis=1).astype(np.int64)


def image_params(seed: int, epoch: int, index: np.ndarray, heights: np.ndarray,
                 widths: np.ndarray, *, size: int, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Crop windows (B, 4) and flips (B,) for a batch: random resized crop + flip in
    training, the centre crop of "resize shorter side, crop centre" in evaluation."""
    if train:
        return (random_resized_crop(seed, epoch, index, heights, widths),
                flips(seed, epoch, index))
    return center_crop(heights, widths, size), np.zeros(len(index), dtype=bool)


def center_window(heights: np.ndarray, widths: np.ndarray, size: tuple[int, int],
                  crop_pct: float) -> np.ndarray:
    """(B, 4) windows of "resize shorter side to max(size) / crop_pct, crop the centre
    (H, W)", in the original image's pixels; for a square size at crop_pct 0.875 exactly
    `center_crop`'s windows.

    Args:
        heights, widths: (B,) image sizes.
        size: the output (H, W).
        crop_pct: timm's crop fraction in (0, 1].

    Returns:
        int64 (top, left, height, width) rows.
    """
    out_h, out_w = size
    if out_h == out_w:
        return center_crop(heights, widths, out_h, crop_pct)
    H = np.asarray(heights, dtype=np.float64)
    W = np.asarray(widths, dtype=np.float64)
    resize_to = int(max(size) / crop_pct)
    short = np.minimum(H, W)
    h = np.maximum(np.minimum(np.round(short * out_h / resize_to), H), 1)
    w = np.maximum(np.minimum(np.round(short * out_w / resize_to), W), 1)
    return np.stack([np.round((H - h) / 2.0), np.round((W - w) / 2.0), h, w],
                    axis=1).astype(np.int64)


def recipe_params(seed: int, epoch: int, index: np.ndarray, heights: np.ndarray,
                  widths: np.ndarray, recipe, size: tuple[int, int] | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Crop windows (B, 4), horizontal (B,) and vertical (B,) flips under an `ImageRecipe`
    (`dali_pipes.recipes`); at the default recipe exactly `image_params`'s values.

    Args:
        seed, epoch, index: the plan's seed, epoch and augmentation keys.
        heights, widths: (B,) image sizes.
        recipe: the validated `ImageRecipe` (size, train, scale, ratio, crop_pct, flips).
        size: the epoch's output (H, W) under a resolution schedule (None: recipe.size).

    Returns:
        (windows int64, hflip bool, vflip bool).
    """
    if not recipe.train:
        none = np.zeros(len(index), dtype=bool)
        return (center_window(heights, widths, size or recipe.size, recipe.crop.crop_pct), none,
                none)
    windows = random_resized_crop(seed, epoch, index, heights, widths, scale=recipe.crop.scale,
                                  ratio=recipe.crop.ratio)
    vflip = uniforms(seed, epoch, index, STREAM_VFLIP, 1)[:, 0] < recipe.crop.vflip
    return windows, flips(seed, epoch, index, recipe.crop.hflip), vflip
