"""Repeated augmentation (DeiT's `RASampler`) as a plan sampler (numpy only).

Each epoch shuffles the indices, repeats each one `repeats` times in a row and keeps the
first num_samples entries, so an epoch has the usual length but holds about
num_samples / repeats distinct images, each drawn `repeats` times. The plan deals entries to
ranks round-robin (`indices[rank::world_size]`), so with world_size >= repeats the copies of
an image land on different ranks, as in DeiT. Each copy is a separate draw with its own
augmentation key (index + draw * num_samples, torch_bridge.order.plan), hence its own crop, flip,
policy and erasing on both backends. The order is a pure function of (seed, epoch): it does
not depend on the world size or batch size, so elastic resume works.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch_bridge.order.plan import EpochPlan

_REPEATED_TAG = 0x5241


@dataclass(frozen=True)
class Repeated:
    """Every shuffled index `repeats` times in a row, truncated to the epoch's length."""

    repeats: int = 3
    order_depends_on_layout = False  # a class attribute, not a field

    def __post_init__(self) -> None:
        if not isinstance(self.repeats, int) or isinstance(self.repeats, bool) \
                or self.repeats < 1:
            raise ValueError(f"repeats must be a positive int, got {self.repeats!r}")

    def describe(self) -> dict[str, Any]:
        return {"sampling": "repeated", "repeats": self.repeats}

    def order(self, plan: EpochPlan, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([plan.seed & 0xFFFFFFFFFFFFFFFF, epoch, _REPEATED_TAG])
        perm = rng.permutation(plan.num_samples)
        return np.repeat(perm, self.repeats)[:plan.num_samples].astype(np.int64)
