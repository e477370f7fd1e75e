"""Batch mixing (mixup / cutmix) and soft targets on the batch tensors, on their device.

The same pure torch function runs for both backends, after the batch is assembled
(`ImageModality.after_batch`, called by the Loader with the epoch and batch position); the
parameters come from `dali_pipes.mixing.mix_params`, a function of (seed, epoch, position).
"""
from __future__ import annotations

import torch

from dali_pipes.mixing import MixParams


def soft_targets(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """float32 (B, num_classes) one-hot rows with label smoothing (timm's: the true class
    gets 1 - smoothing + smoothing / C, every other class smoothing / C).

    Args:
        labels: int64 (B,) class ids.
        num_classes: C.
        smoothing: in [0, 1).

    Returns:
        Rows summing to 1, on the labels' device.
    """
    off = smoothing / num_classes
    out = torch.full((labels.shape[0], num_classes), off, dtype=torch.float32,
                     device=labels.device)
    return out.scatter_(1, labels.view(-1, 1), 1.0 - smoothing + off)


def _box_mask(boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """bool (B, 1, H, W): True inside each row's (top, bottom, left, right) box."""
    ys = torch.arange(height, device=boxes.device).view(1, -1, 1)
    xs = torch.arange(width, device=boxes.device).view(1, 1, -1)
    b = boxes.view(-1, 4, 1, 1)
    inside = (ys >= b[:, 0]) & (ys < b[:, 1]) & (xs >= b[:, 2]) & (xs < b[:, 3])
    return inside.unsqueeze(1)


def mix_batch(images: torch.Tensor, labels: torch.Tensor, params: MixParams, *,
              num_classes: int, smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixed images and their soft targets.

    Args:
        images: (B, C, H, W) float or uint8 (any memory format; kept).
        labels: int64 (B,).
        params: the batch's `MixParams`.
        num_classes: target width.
        smoothing: label smoothing.

    Returns:
        (images of the same dtype and memory format, float32 (B, num_classes) targets).
    """
    dev = images.device
    perm = torch.from_numpy(params.perm).to(dev)
    target = soft_targets(labels, num_classes, smoothing)
    lam_t = torch.from_numpy(params.target_lam).to(dev, torch.float32).view(-1, 1)
    target = lam_t * target + (1 - lam_t) * target[perm]
    if (params.lam == 1).all() and not params.boxes.any():
        return images, target
    work = images.float() if images.dtype == torch.uint8 else images
    lam = torch.from_numpy(params.lam).to(dev, work.dtype).view(-1, 1, 1, 1)
    src = work[perm]
    blend = work * lam + src * (1 - lam)
    mask = _box_mask(torch.from_numpy(params.boxes).to(dev), images.shape[-2],
                     images.shape[-1])
    out = torch.where(mask, src, blend)
    if images.dtype == torch.uint8:
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    fmt = torch.channels_last if images.is_contiguous(memory_format=torch.channels_last) \
        and not images.is_contiguous() else torch.contiguous_format
    return out.contiguous(memory_format=fmt), target
