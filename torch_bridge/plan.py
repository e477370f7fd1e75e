"""EpochPlan: the single source of sample order for every backend (numpy only).

Order, sharding and batching are pure functions of (seed, epoch, rank, world size), so
both backends see the same samples in the same order and resume is exact: the state of a
pass is just (epoch, batches consumed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol

import numpy as np


class Sampler(Protocol):
    """An order strategy (see torch_bridge.sampling): the global order of an epoch, a pure
    function of (plan.seed, epoch), the same on every rank."""

    def order(self, plan: "EpochPlan", epoch: int) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EpochPlan:
    """Which dataset indices a rank reads in which batch of an epoch.

    Sharding follows torch's DistributedSampler: the epoch's order is padded by wrapping
    around to a multiple of `world_size` (or truncated when `drop_last`), then rank r takes
    every `world_size`-th index starting at r. Every rank gets the same number of batches.
    With `drop_last` the last incomplete batch of each rank is dropped too.

    `sampler` (optional, needs `shuffle`) replaces the shuffled permutation with another
    order strategy, e.g. class-balanced or source-aware sampling (torch_bridge.sampling).
    """

    num_samples: int
    batch_size: int
    seed: int = 0
    shuffle: bool = True
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1
    sampler: Sampler | None = None

    def __post_init__(self) -> None:
        if self.num_samples <= 0:
            raise ValueError(f"num_samples must be positive, got {self.num_samples}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        if self.world_size <= 0 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, world_size); got rank={self.rank}, "
                             f"world_size={self.world_size}")
        if self.drop_last and self.num_samples < self.world_size:
            raise ValueError(f"drop_last with {self.num_samples} samples leaves nothing for "
                             f"{self.world_size} ranks")
        if self.sampler is not None and not self.shuffle:
            raise ValueError("a sampler draws a random order per epoch; it needs shuffle=True")

    @property
    def samples_per_rank(self) -> int:
        if self.drop_last:
            return self.num_samples // self.world_size
        return -(-self.num_samples // self.world_size)

    def __len__(self) -> int:
        """Batches per epoch on this rank (the same on every rank)."""
        per_rank = self.samples_per_rank
        return per_rank // self.batch_size if self.drop_last else -(-per_rank // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The whole data set's order for `epoch` (before sharding)."""
        if self.sampler is not None:
            return self.sampler.order(self, epoch)
        if not self.shuffle:
            return np.arange(self.num_samples, dtype=np.int64)
        rng = np.random.default_rng([self.seed & 0xFFFFFFFFFFFFFFFF, epoch])
        return rng.permutation(self.num_samples).astype(np.int64)

    def rank_indices(self, epoch: int) -> np.ndarray:
        """This rank's share of `epoch`, padded or truncated to `samples_per_rank`."""
        order = self.order(epoch)
        total = self.samples_per_rank * self.world_size
        if total > len(order):
            order = np.resize(order, total)  # wraps around, like DistributedSampler
        return order[:total][self.rank::self.world_size]

    def batch(self, epoch: int, position: int) -> np.ndarray:
        """Indices of batch number `position` of `epoch` on this rank."""
        if not 0 <= position < len(self):
            raise IndexError(f"batch {position} out of range for {len(self)} batches")
        start = position * self.batch_size
        return self.rank_indices(epoch)[start:start + self.batch_size]

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(position, indices) for each batch of `epoch` from batch `start` on."""
        if not 0 <= start <= len(self):
            raise ValueError(f"start batch {start} out of range for {len(self)} batches")
        indices = self.rank_indices(epoch)
        for position in range(start, len(self)):
            yield position, indices[position * self.batch_size:(position + 1) * self.batch_size]
