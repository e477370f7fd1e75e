"""The photometric part of the image graph (colour jitter, grayscale, blur) on uint8 HWC
images, per-sample parameters from external inputs "jitter" (5,) and "blur_sigma" ().

Adjustments follow torchvision's definitions (grayscale weights 0.2989, 0.587, 0.114;
contrast blends with the mean gray level; saturation with the pixel's gray), computed in
float and rounded back to uint8 once; hue uses DALI's `fn.hsv` (a rotation in YIQ space, an
approximation of torchvision's HSV shift: see docs/recipes.md for the measured difference).
Imports DALI, never torch.
"""
from __future__ import annotations

import nvidia.dali.fn as fn
import nvidia.dali.math as dmath
import nvidia.dali.types as types

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale


def _gray(x):
    """(H, W, 1) gray level of float HWC pixels: r w0 + g w1 + b w2 in one per-pixel matrix
    product (`fn.coord_transform`)."""
    return fn.coord_transform(x, M=list(GRAY_WEIGHTS), dtype=types.FLOAT)


def _blend(x, other, factor):
    return dmath.clamp(x * factor + other * (1.0 - factor), 0.0, 255.0)


def photometric(images, jitter, sigma, *, device: str, recipe):
    """Colour jitter, grayscale and blur as the recipe asks (operators only for those).

    Args:
        images: uint8 HWC DataNode.
        jitter: float32 (5,) per sample (`dali_pipes.photometric.photometric_params`).
        sigma: float32 () per sample blur sigma.
        device: "cpu" or "gpu".
        recipe: the `ImageRecipe`.

    Returns:
        uint8 HWC DataNode.
    """
    b, c, s, h = recipe.color_jitter
    param = (lambda i: jitter[i].gpu()) if device == "gpu" else (lambda i: jitter[i])
    if any((b, c, s, h)) or recipe.grayscale > 0:
        x = fn.cast(images, dtype=types.FLOAT, device=device)
        if b:
            x = dmath.clamp(x * param(0), 0.0, 255.0)
        if c:
            x = _blend(x, fn.reductions.mean(_gray(x), device=device), param(1))
        if s:
            x = _blend(x, _gray(x), param(2))
        if h:
            x = fn.hsv(x, device=device, hue=jitter[3] * 360.0, dtype=types.FLOAT)
        if recipe.grayscale > 0:
            x = _blend(x, _gray(x), 1.0 - param(4))
        images = fn.cast(x, dtype=types.UINT8, device=device)
    if recipe.blur > 0:
        images = fn.gaussian_blur(images, device=device, window_size=recipe.blur_kernel,
                                  sigma=sigma)
    return images
