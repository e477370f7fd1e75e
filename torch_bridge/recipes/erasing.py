"""Random erasing on the batch tensors, after normalisation, on their device (both backends
run this same function; the boxes and noise come from `dali_pipes.recipes.erasing`).

On the host each erased box is one box-sized copy. On a GPU the whole batch is erased by a
few batch-wide ops: the boxes (and, for random fill, every box's noise, packed end to end)
cross in one pinned, non-blocking copy (`torch_bridge.engines._transfer.stage`), and a mask built
from them selects the pixels; nothing waits for the training stream.
"""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.recipes.erasing import erase_boxes, erase_noise
from torch_bridge.engines._transfer import stage
from torch_bridge.recipes.mixing import one_thread


def erase_batch(images: torch.Tensor, keys: np.ndarray, *, seed: int, epoch: int, recipe
                ) -> torch.Tensor:
    """`images` (B, C, H, W) with each sample's box filled (in place when possible).

    Args:
        images: normalized float pixels (any memory format).
        keys: int64 (B,) sample keys (the dataset indices), on the host.
        seed, epoch: the loader's seed and the epoch.
        recipe: an `ImageRecipe` (erasing, erasing_scale, erasing_ratio, erasing_value).

    Returns:
        The erased images (same tensor, dtype and memory format).
    """
    height, width = images.shape[-2:]
    boxes = erase_boxes(seed, epoch, keys, height, width, p=recipe.erasing.p,
                        scale=recipe.erasing.scale, ratio=recipe.erasing.ratio)
    rows = np.flatnonzero(boxes[:, 2])
    noise = None
    if recipe.erasing.value == "random":
        noise = [erase_noise(seed, epoch, keys[r], (images.shape[1], *boxes[r, 2:].tolist()))
                 for r in rows]
    if images.device.type != "cpu":
        return erase_on_device(images, boxes, noise, recipe.erasing.value)
    with one_thread():  # box-sized copies: not worth the intra-op pool
        for k, row in enumerate(rows):
            top, left, h, w = boxes[row].tolist()
            fill = torch.from_numpy(noise[k]).to(images.dtype) if noise is not None \
                else float(recipe.erasing.value)
            images[row, :, top:top + h, left:left + w] = fill
    return images


def box_mask(boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """bool (B, 1, H, W): True inside each row's box (top, left, h, w; h = 0: no box)."""
    y = torch.arange(height, device=boxes.device).view(1, -1, 1)
    x = torch.arange(width, device=boxes.device).view(1, 1, -1)
    top, left, h, w = (boxes[:, k].view(-1, 1, 1) for k in range(4))
    return ((y >= top) & (y < top + h) & (x >= left) & (x < left + w)).unsqueeze(1)


def erase_on_device(images: torch.Tensor, boxes: np.ndarray, noise: list | None, value
                    ) -> torch.Tensor:
    """The batch-wide erase (any device; used on GPUs): `noise` holds each erased row's
    (C, h, w) fill in row order, or None for the constant `value`."""
    fields = {"boxes": torch.from_numpy(np.ascontiguousarray(boxes, np.int64))}
    if noise:
        fields["noise"] = torch.from_numpy(np.concatenate([n.ravel() for n in noise]))
    moved = stage(fields, images.device)
    mask = box_mask(moved["boxes"], *images.shape[-2:]).expand_as(images)
    if noise is None:
        return images.masked_fill_(mask, float(value))
    if noise:  # masked_scatter_ fills in logical (B, C, H, W) order: each box's c, y, x
        images.masked_scatter_(mask, moved["noise"].to(images.dtype))
    return images
