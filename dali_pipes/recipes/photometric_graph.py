"""The photometric part of the image graph (colour jitter, grayscale, blur) on uint8 HWC
images, per-sample parameters from external inputs "jitter" (5,) and "blur_sigma" ().

On DALI's CPU backend the fused operator `DpPhotometric` (`dali_pipes/native/
photometric_op.cc`) does colour jitter and grayscale where it is available and the caller
allows it: torchvision's uint8 arithmetic, rounded after every adjustment as torchvision
rounds, hue as torchvision's HSV shift. Otherwise (and on the GPU) DALI's own operators do:
torchvision's definitions (grayscale weights 0.2989, 0.587, 0.114; contrast blends with the
mean gray level; saturation with the pixel's gray), computed in float and rounded back to
uint8 once; hue with DALI's `fn.hsv` (a rotation in YIQ space, an approximation of
torchvision's HSV shift: see docs/recipes.md for the measured difference). Blur is
`fn.gaussian_blur` on either path. Imports DALI, never torch.
"""
from __future__ import annotations

import nvidia.dali.fn as fn
import nvidia.dali.math as dmath
import nvidia.dali.types as types

from dali_pipes import native

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale


def _gray(x):
    """(H, W, 1) gray level of float HWC pixels: r w0 + g w1 + b w2 in one per-pixel matrix
    product (`fn.coord_transform`)."""
    return fn.coord_transform(x, M=list(GRAY_WEIGHTS), dtype=types.FLOAT)


def _blend(x, other, factor):
    return dmath.clamp(x * factor + other * (1.0 - factor), 0.0, 255.0)


# DpPhotometric's "adjust" bits, in the order of the jitter row
_ADJUST_BITS = {"brightness": 1, "contrast": 2, "saturation": 4, "hue": 8, "grayscale": 16}


def adjust_mask(recipe) -> int:
    """DpPhotometric's "adjust" bit mask: the adjustments `recipe` enables."""
    on = [bool(x) for x in recipe.photometric.color_jitter] + [recipe.photometric.grayscale > 0]
    return sum(bit for bit, used in zip(_ADJUST_BITS.values(), on, strict=True) if used)


def fused_photometric_applies(device: str, fused: bool | None = None) -> bool:
    """Whether `photometric` runs the fused operator for `device` and `fused` (None: where
    available; True: required, RuntimeError when it is unavailable)."""
    return device == "cpu" and native.wanted("photometric_op", fused,
                                             "colour-jitter operator")


def photometric(images, jitter, sigma, *, device: str, recipe, fused: bool | None = None):
    """Colour jitter, grayscale and blur as the recipe asks (operators only for those).

    Args:
        images: uint8 HWC DataNode (3 channels where the recipe jitters or grays).
        jitter: float32 (5,) per sample (`dali_pipes.recipes.photometric.photometric_params`).
        sigma: float32 () per sample blur sigma.
        device: "cpu" or "gpu".
        recipe: the `ImageRecipe`.
        fused: colour jitter and grayscale with the fused CPU operator (None: where it is
            available; True: require it; False: DALI's own operators).

    Returns:
        uint8 HWC DataNode.
    """
    mask = adjust_mask(recipe)
    if mask and fused_photometric_applies(device, fused):
        # a plugin operator: fn gains it when the library loads, the stub cannot list it
        images = fn.dp_photometric(images, jitter, adjust=mask)  # type: ignore[attr-defined]
    elif mask:
        images = _composed(images, jitter, device, recipe)
    if recipe.photometric.blur > 0:
        images = fn.gaussian_blur(images, device=device, window_size=recipe.photometric.blur_kernel,
                                  sigma=sigma)
    return images


def _composed(images, jitter, device: str, recipe):
    """Colour jitter and grayscale with DALI's own operators (float, rounded once)."""
    b, c, s, h = recipe.photometric.color_jitter
    param = (lambda i: jitter[i].gpu()) if device == "gpu" else (lambda i: jitter[i])
    x = fn.cast(images, dtype=types.FLOAT, device=device)
    if b:
        x = dmath.clamp(x * param(0), 0.0, 255.0)
    if c:
        x = _blend(x, fn.reductions.mean(_gray(x), device=device), param(1))
    if s:
        x = _blend(x, _gray(x), param(2))
    if h:
        x = fn.hsv(x, device=device, hue=jitter[3] * 360.0, dtype=types.FLOAT)
    if recipe.photometric.grayscale > 0:
        x = _blend(x, _gray(x), 1.0 - param(4))
    return fn.cast(x, dtype=types.UINT8, device=device)
