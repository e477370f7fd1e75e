"""Colour jitter, grayscale and blur on one uint8 (3, H, W) image with
torchvision.transforms.v2.functional, in the order and with the parameters of
`dali_pipes.recipes.photometric` (the DALI graph applies the same ones)."""
from __future__ import annotations

import numpy as np
import torch


def apply_photometric(image: torch.Tensor, jitter: np.ndarray, sigma: float, recipe
                      ) -> torch.Tensor:
    """`image` adjusted as one row of `photometric_params` says.

    Args:
        image: uint8 (3, H, W).
        jitter: [brightness, contrast, saturation, hue turns, grayscale 0/1].
        sigma: the blur sigma (ignored unless the recipe blurs and the row drew a blur).
        recipe: the `ImageRecipe`.

    Returns:
        uint8 (3, H, W).
    """
    from torchvision.transforms.v2 import functional as F

    from dali_pipes.recipes.photometric import NO_BLUR_SIGMA

    b, c, s, h = recipe.photometric.color_jitter
    if b:
        image = F.adjust_brightness(image, float(jitter[0]))
    if c:
        image = F.adjust_contrast(image, float(jitter[1]))
    if s:
        image = F.adjust_saturation(image, float(jitter[2]))
    if h:
        image = F.adjust_hue(image, float(jitter[3]))
    if recipe.photometric.grayscale > 0 and jitter[4]:
        image = F.rgb_to_grayscale(image, num_output_channels=3)
    if recipe.photometric.blur > 0 and sigma > NO_BLUR_SIGMA:
        k = recipe.photometric.blur_kernel
        image = F.gaussian_blur(image, [k, k], [float(sigma), float(sigma)])
    return image
