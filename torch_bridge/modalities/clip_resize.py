"""Resize of clips that PyAV decoded in the feed, with the torch path's own kernel.

A clip that goes through the PyAV fallback is already decoded in Python; resizing it there
with torchvision's uint8 antialiased bilinear kernel (the torch reference path's exact call)
is cheaper than DALI's CPU resize (measured in docs/measurements.md), ships
an eighth of the bytes from feed workers, and gives the same pixels as the torch path. The
video graph then resizes only the clips DALI decodes itself (dali_pipes.pipelines.video).
"""
from __future__ import annotations

import numpy as np
import torch


def resize_clip(clip: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """(T, H, W, 3) uint8 frames resized to `size` (H, W); unchanged when size is None.

    Args:
        clip: decoded frames, channels last.
        size: output (height, width), or None for native resolution.

    Returns:
        (T, size[0], size[1], 3) uint8, C-contiguous.
    """
    if size is None or clip.shape[1:3] == tuple(size):
        return clip
    from torchvision.transforms.v2 import functional as F

    frames = torch.from_numpy(clip).permute(0, 3, 1, 2)
    frames = F.resize(frames, list(size), antialias=True,
                      interpolation=F.InterpolationMode.BILINEAR)
    return np.ascontiguousarray(frames.permute(0, 2, 3, 1).numpy())
