"""Augmentation policies on one uint8 (3, H, W) image with torchvision.transforms.v2
.functional, from the (operation, magnitude) pairs of `dali_pipes.recipes.policies` (the DALI
graph applies the same ones)."""
from __future__ import annotations

import math

import numpy as np
import torch

from dali_pipes.recipes.policies import OPS


def _apply_op(image: torch.Tensor, name: str, m: float) -> torch.Tensor:
    from torchvision.transforms.v2 import functional as F

    nearest = F.InterpolationMode.NEAREST
    if name in ("ShearX", "ShearY"):
        shear = [math.degrees(math.atan(m)), 0.0]
        return F.affine(image, angle=0.0, translate=[0, 0], scale=1.0,
                        shear=shear if name == "ShearX" else shear[::-1],
                        interpolation=nearest, center=[0, 0])
    if name in ("TranslateX", "TranslateY"):
        t = [int(m), 0] if name == "TranslateX" else [0, int(m)]
        return F.affine(image, angle=0.0, translate=t, scale=1.0, shear=[0.0, 0.0],
                        interpolation=nearest)
    simple = {"Rotate": lambda: F.rotate(image, angle=m, interpolation=nearest),
              "Brightness": lambda: F.adjust_brightness(image, 1.0 + m),
              "Color": lambda: F.adjust_saturation(image, 1.0 + m),
              "Contrast": lambda: F.adjust_contrast(image, 1.0 + m),
              "Sharpness": lambda: F.adjust_sharpness(image, 1.0 + m),
              "Posterize": lambda: F.posterize(image, int(m)),
              "Solarize": lambda: F.solarize(image, 255.0 * m),
              "AutoContrast": lambda: F.autocontrast(image),
              "Equalize": lambda: F.equalize(image), "Invert": lambda: F.invert(image)}
    return simple[name]() if name in simple else image


def apply_policy(image: torch.Tensor, ops: np.ndarray, mags: np.ndarray) -> torch.Tensor:
    """`image` through one sample's operations, in slot order.

    Args:
        image: uint8 (3, H, W).
        ops: int (slots,) indices into `dali_pipes.recipes.policies.OPS`.
        mags: float (slots,) signed magnitudes.

    Returns:
        uint8 (3, H, W).
    """
    for op, m in zip(ops.tolist(), mags.tolist(), strict=True):
        image = _apply_op(image, OPS[op], float(m))
    return image
