"""Batch-mixing parameters (mixup / cutmix) as pure functions of (seed, epoch, batch
position) (numpy only).

timm's `Mixup` semantics: with both alphas set, cutmix is chosen with `switch_prob`; a batch
(mode "batch") or each sample (mode "elem") is mixed with probability `mix_prob`; lambda is
drawn from Beta(alpha, alpha); a cutmix box of area fraction 1 - lambda is centred at a
uniform point and clipped to the image, and lambda is corrected to the area actually pasted.
Samples are paired with a random permutation of the batch (timm pairs with the flipped batch).
The generator is seeded from (seed, epoch, position, STREAM_MIX) alone, so a resumed loader
draws exactly the parameters of the uninterrupted one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.geometry.draws import STREAM_MIX

_MASK = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True)
class MixParams:
    """One batch's mixing: partner `perm` (B,), `lam` (B,) the weight of each sample's own
    pixels in a mixup blend (1 for cutmix and unmixed rows), `boxes` (B, 4) int64 cutmix
    boxes (top, bottom, left, right; empty rows for no box) and `target_lam` (B,) the
    weight of each sample's own label."""

    perm: np.ndarray
    lam: np.ndarray
    boxes: np.ndarray
    target_lam: np.ndarray


def mix_rng(seed: int, epoch: int, position: int) -> np.random.Generator:
    """The generator of one batch's mixing parameters."""
    return np.random.default_rng(np.random.SeedSequence(
        [seed & _MASK, epoch & _MASK, position & _MASK, STREAM_MIX]))


def mix_params(seed: int, epoch: int, position: int, n: int, height: int, width: int,
               recipe) -> MixParams:
    """Mixing parameters of batch `position` of `epoch` (n samples of height x width).

    Args:
        seed, epoch, position: the loader's seed, the epoch and the plan batch position.
        n, height, width: the batch's samples and image size.
        recipe: an `ImageRecipe` (mixup, cutmix, mix_prob, switch_prob, mix_mode).

    Returns:
        `MixParams`; all-ones lambdas when the recipe mixes nothing.
    """
    rng = mix_rng(seed, epoch, position)
    rows = n if recipe.mixing.mix_mode == "elem" else 1
    use_cut = rng.random(rows) < recipe.mixing.switch_prob
    if recipe.mixing.cutmix <= 0:
        use_cut[:] = False
    elif recipe.mixing.mixup <= 0:
        use_cut[:] = True
    alpha = np.where(use_cut, recipe.mixing.cutmix, recipe.mixing.mixup)
    active = (rng.random(rows) < recipe.mixing.mix_prob) & (alpha > 0)
    safe = np.where(alpha > 0, alpha, 1.0)
    lam = np.where(active, rng.beta(safe, safe), 1.0)
    centres = rng.random((rows, 2))
    perm = rng.permutation(n)
    cut = active & use_cut
    boxes = _boxes(lam, centres, height, width, cut)
    area = (boxes[:, 1] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 2]) / float(height * width)
    target_lam = np.where(cut, 1.0 - area, lam)
    pixel_lam = np.where(cut, 1.0, lam)
    if rows == 1:
        boxes, pixel_lam, target_lam = (np.repeat(a, n, axis=0) for a in
                                        (boxes, pixel_lam, target_lam))
    return MixParams(perm=perm.astype(np.int64), lam=pixel_lam, boxes=boxes,
                     target_lam=target_lam)


def _boxes(lam: np.ndarray, centres: np.ndarray, height: int, width: int,
           cut: np.ndarray) -> np.ndarray:
    """timm's `rand_bbox`: sides sqrt(1 - lam) of the image's, clipped; empty where not cut."""
    ratio = np.sqrt(1.0 - lam)
    cut_h, cut_w = (ratio * height).astype(np.int64), (ratio * width).astype(np.int64)
    cy = np.floor(centres[:, 0] * height).astype(np.int64)
    cx = np.floor(centres[:, 1] * width).astype(np.int64)
    boxes = np.stack([np.clip(cy - cut_h // 2, 0, height), np.clip(cy + cut_h // 2, 0, height),
                      np.clip(cx - cut_w // 2, 0, width), np.clip(cx + cut_w // 2, 0, width)],
                     axis=1)
    boxes[~cut] = 0
    return boxes.astype(np.int64)
