"""Random erasing on the batch tensors, after normalisation, on their device (both backends
run this same function; the boxes and noise come from `dali_pipes.erasing`)."""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.erasing import erase_boxes, erase_noise
from torch_bridge.mixing import one_thread


def erase_batch(images: torch.Tensor, keys: np.ndarray, *, seed: int, epoch: int, recipe
                ) -> torch.Tensor:
    """`images` (B, C, H, W) with each sample's box filled (in place when possible).

    Args:
        images: normalized float pixels (any memory format).
        keys: int64 (B,) sample keys (the dataset indices).
        seed, epoch: the loader's seed and the epoch.
        recipe: an `ImageRecipe` (erasing, erasing_scale, erasing_ratio, erasing_value).

    Returns:
        The erased images (same tensor, dtype and memory format).
    """
    height, width = images.shape[-2:]
    boxes = erase_boxes(seed, epoch, keys, height, width, p=recipe.erasing,
                        scale=recipe.erasing_scale, ratio=recipe.erasing_ratio)
    with one_thread():  # box-sized copies: not worth the intra-op pool
        for row in np.flatnonzero(boxes[:, 2]):
            top, left, h, w = boxes[row].tolist()
            if recipe.erasing_value == "random":
                noise = erase_noise(seed, epoch, keys[row], (images.shape[1], h, w))
                fill: torch.Tensor | float = torch.from_numpy(noise).to(images.device,
                                                                        images.dtype)
            else:
                fill = float(recipe.erasing_value)
            images[row, :, top:top + h, left:left + w] = fill
    return images
