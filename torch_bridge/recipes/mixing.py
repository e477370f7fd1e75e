"""Batch mixing (mixup / cutmix) and soft targets on the batch tensors, on their device.

The same pure torch function runs for both backends, after the batch is assembled
(`ImageModality.after_batch`, called by the Loader with the epoch and batch position); the
parameters come from `dali_pipes.recipes.mixing.mix_params`, a function of (seed, epoch, position).
On the host batches are mixed in place, row by row along the permutation's cycles, without
a batch-sized temporary (on the host each new batch-sized tensor costs its page faults). On
a GPU the batch is mixed by batch-wide ops (`mix_on_device`): the parameters cross in one
pinned, non-blocking copy, so nothing waits for the training stream and no row is a Python
step.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from dali_pipes.recipes.mixing import MixParams


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


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's CPU ops on one intra-op thread for a while, then as before: the row-sized
    ops of the batch steps are too small to share, and on busy cores handing them out to
    the pool costs more than the work (the loader's own threads already fill the cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _mixed_row(own: torch.Tensor, partner: torch.Tensor, lam: float, box) -> torch.Tensor:
    """One row: `lam * own + (1 - lam) * partner` (when lam < 1), then the partner's box."""
    out = own.float() if own.dtype == torch.uint8 else own.clone()
    other = partner.float() if partner.dtype == torch.uint8 else partner
    if lam != 1:
        out.mul_(lam).add_(other * (1 - lam))
    top, bottom, left, right = box
    out[:, top:bottom, left:right] = other[:, top:bottom, left:right]
    return out


def _cycles(perm: np.ndarray) -> list[list[int]]:
    """The permutation's cycles, each in the order i, perm[i], perm[perm[i]], ..."""
    seen = np.zeros(len(perm), bool)
    out = []
    for start in range(len(perm)):
        cycle, i = [], start
        while not seen[i]:
            seen[i] = True
            cycle.append(i)
            i = int(perm[i])
        if cycle:
            out.append(cycle)
    return out


def _mix_in_place(images: torch.Tensor, perm: np.ndarray, lam: np.ndarray,
                  boxes: np.ndarray) -> None:
    """Mix every row of `images` with its partner's original pixels, in place: the rows are
    written along the permutation's cycles (row i before its partner perm[i]), so each
    partner is still unchanged when a row reads it, except the cycle's first row, which is
    copied before it is written."""
    lam32 = lam.astype(np.float32)
    todo = (lam32 != 1) | ((boxes[:, 1] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 2]))
    for cycle in _cycles(perm):
        if not todo[cycle].any():
            continue
        first = images[cycle[0]].clone()
        for i in cycle:
            if not todo[i]:
                continue
            j = int(perm[i])
            partner = first if j == cycle[0] else images[j]
            row = _mixed_row(images[i], partner, float(lam32[i]), boxes[i].tolist())
            images[i].copy_(row.round_().clamp_(0, 255) if images.dtype == torch.uint8
                            else row)


def mix_batch(images: torch.Tensor, labels: torch.Tensor, params: MixParams, *,
              num_classes: int, smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixed images (in place) and their soft targets.

    Args:
        images: (B, C, H, W) float or uint8 (any memory format; kept).
        labels: int64 (B,).
        params: the batch's `MixParams`.
        num_classes: target width.
        smoothing: label smoothing.

    Returns:
        (images of the same dtype and memory format, float32 (B, num_classes) targets):
        each row `lam * own + (1 - lam) * partner`, then the partner's box pasted.
    """
    from torch_bridge.engines._transfer import stage
    moved = stage({"perm": torch.from_numpy(np.ascontiguousarray(params.perm, np.int64)),
                   "target_lam": torch.from_numpy(params.target_lam.astype(np.float32)),
                   "lam": torch.from_numpy(params.lam.astype(np.float32)),
                   "boxes": torch.from_numpy(np.ascontiguousarray(params.boxes, np.int64))},
                  images.device)
    target = soft_targets(labels, num_classes, smoothing)
    lam_t = moved["target_lam"].view(-1, 1)
    target = lam_t * target + (1 - lam_t) * target[moved["perm"]]
    if images.device.type != "cpu":
        return mix_on_device(images, moved["perm"], moved["lam"], moved["boxes"]), target
    with one_thread():
        _mix_in_place(images, params.perm, params.lam, params.boxes)
    return images, target


def mix_on_device(images: torch.Tensor, perm: torch.Tensor, lam: torch.Tensor,
                  boxes: torch.Tensor) -> torch.Tensor:
    """The batch-wide mix (any device; used on GPUs), in place, with the same arithmetic
    as the host's rows: `own * lam + partner * (1 - lam)` in float32 where lam < 1, then
    the partner's box (top, bottom, left, right) pasted; uint8 rounded and clamped.

    Args:
        images: (B, C, H, W) float or uint8.
        perm: int64 (B,) partners; lam: float32 (B,); boxes: int64 (B, 4); on its device.
    """
    partner = images[perm]  # a copy: the partners' original pixels
    own = images.float() if images.dtype == torch.uint8 else images
    other = partner.float() if partner.dtype == torch.uint8 else partner
    weight = lam.view(-1, 1, 1, 1).to(own.dtype)
    mixed = torch.where(weight != 1, own * weight + other * (1 - weight), own)
    height, width = images.shape[-2:]
    y = torch.arange(height, device=images.device).view(1, 1, -1, 1)
    x = torch.arange(width, device=images.device).view(1, 1, 1, -1)
    top, bottom, left, right = (boxes[:, k].view(-1, 1, 1, 1) for k in range(4))
    inside = (y >= top) & (y < bottom) & (x >= left) & (x < right)
    mixed = torch.where(inside, other, mixed)
    if images.dtype == torch.uint8:
        mixed = mixed.round_().clamp_(0, 255)
    return images.copy_(mixed)
