"""Augmentation policies in the image graph: per slot, a nearest-neighbour affine warp and
the photometric operations of `dali_pipes.policies`, each the identity unless the sample
drew it (inputs "policy_matrix" (slots, 2, 3) and "policy_params" (slots, 9)).

Each operation reproduces torchvision's uint8 arithmetic (truncating blends, floored gray,
rounded sharpness kernel, PIL-like posterize / solarize / autocontrast); equalize is DALI's
`fn.equalize` (OpenCV's histogram equalisation, close to but not torchvision's). Imports
DALI, never torch.
"""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.math as dmath
import nvidia.dali.types as types

from dali_pipes.pipelines.photometric import GRAY_WEIGHTS

_SHARPEN = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13


def _gray_floor(x):
    r, g, b = (x[:, :, i:i + 1] for i in range(3))
    return dmath.floor(r * GRAY_WEIGHTS[0] + g * GRAY_WEIGHTS[1] + b * GRAY_WEIGHTS[2])


def _blend(x, other, factor):
    """torchvision's uint8 `_blend`: clamp then truncate."""
    return dmath.floor(dmath.clamp(x * factor + other * (1.0 - factor), 0.0, 255.0))


def _choose(x, other, flag):
    return x + flag * (other - x)


def _interior_mask(x, device: str):
    """1.0 inside the one-pixel border, 0.0 on it (of any image size): the 3x3 kernel
    sums to 1 only where no tap falls outside the image."""
    taps = fn.filter(x * 0.0 + 1.0, _SHARPEN, device=device, border="constant",
                     dtype=types.FLOAT)  # constant border: zeros
    return fn.cast(taps > 0.99, dtype=types.FLOAT, device=device)


def _slot(x8, matrix, p, *, device: str, invert: bool):
    x8 = fn.warp_affine(x8, device=device, matrix=matrix, fill_value=0,
                        interp_type=types.INTERP_NN)
    x = fn.cast(x8, dtype=types.FLOAT, device=device)
    x = _blend(x, 0.0, p[0])
    x = _blend(x, _gray_floor(x), p[1])
    x = _blend(x, fn.reductions.mean(_gray_floor(x), device=device), p[2])
    blurred = dmath.floor(fn.filter(x, _SHARPEN, device=device, border="clamp",
                                    dtype=types.FLOAT) + 0.5)
    x = _blend(x, x + _interior_mask(x, device) * (blurred - x), p[3])
    x = dmath.floor(x / p[4]) * p[4]
    x = x + fn.cast(x >= p[5], dtype=types.FLOAT, device=device) * (255.0 - 2.0 * x)
    x = _choose(x, _autocontrast(x, device), p[6])
    eq = fn.cast(fn.equalize(fn.cast(x, dtype=types.UINT8, device=device), device=device),
                 dtype=types.FLOAT, device=device)
    x = _choose(x, eq, p[7])
    if invert:
        x = _choose(x, 255.0 - x, p[8])
    return fn.cast(x, dtype=types.UINT8, device=device)


def _autocontrast(x, device: str):
    lo = fn.reductions.min(x, axes=[0, 1], device=device)
    hi = fn.reductions.max(x, axes=[0, 1], device=device)
    flat = fn.cast(hi == lo, dtype=types.FLOAT, device=device)
    inv_scale = (hi - lo) / 255.0 + flat
    return dmath.floor(dmath.clamp((x - lo * (1.0 - flat)) / inv_scale, 0.0, 255.0))


def apply_policy(images, matrices, params, *, device: str, recipe, slots: int):
    """The recipe's policy on uint8 HWC images (every slot in turn).

    Args:
        images: uint8 HWC DataNode at the output size.
        matrices: float32 (slots, 2, 3) per sample.
        params: float32 (slots, 9) per sample.
        device: "cpu" or "gpu".
        recipe: the `ImageRecipe`.
        slots: operations per sample.

    Returns:
        uint8 HWC DataNode.
    """
    for k in range(slots):
        p = params[k]
        get = (lambda i, p=p: p[i].gpu()) if device == "gpu" else (lambda i, p=p: p[i])
        images = _slot(images, matrices[k], [get(i) for i in range(9)], device=device,
                       invert=recipe.auto_augment == "autoaugment")
    return images
