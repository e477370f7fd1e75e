"""Test helper: (position, indices) batches of an EpochPlan, without the augmentation keys."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from torch_bridge.order.plan import EpochPlan


def batches(plan: EpochPlan, epoch: int, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
    """(position, indices) for each batch of `epoch` from batch `start` on.

    Args:
        plan: the plan to read.
        epoch: the epoch.
        start: the first batch position.
    Returns:
        an iterator over (position, int64 indices) pairs, as `keyed_batches` less the keys.
    """
    for position, indices, _ in plan.keyed_batches(epoch, start):
        yield position, indices
