"""EpochPlan: the single source of sample order for every backend (numpy only).

Order, sharding and batching are pure functions of (seed, epoch, rank, world size), so
both backends see the same samples in the same order and resume is exact: the state of a
pass is just (epoch, batches consumed).

Augmentation keys (`keyed_batches`): a sample's random parameters are drawn from
(seed, epoch, key) with key = index + draw * num_samples, where `draw` counts the times the
index already occurred earlier in the epoch's (padded) order. A first draw's key is its index;
a sample drawn again (balanced sampling with replacement, the wrap-around padding of the last
ranks) gets parameters of its own instead of a copy of the first draw's.
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
        return self._rank_share(epoch)[0]

    def rank_keys(self, epoch: int) -> np.ndarray:
        """Augmentation keys aligned with `rank_indices(epoch)` (see the module doc)."""
        return self._rank_share(epoch)[1]

    def keyed_batches(self, epoch: int, start: int = 0
                      ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(position, indices, augmentation keys) for each batch of `epoch` from `start`."""
        if not 0 <= start <= len(self):
            raise ValueError(f"start batch {start} out of range for {len(self)} batches")
        indices, keys = self._rank_share(epoch)
        for position in range(start, len(self)):
            share = slice(position * self.batch_size, (position + 1) * self.batch_size)
            yield position, indices[share], keys[share]

    def _rank_share(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, augmentation keys) of this rank's share of `epoch`."""
        order = self.order(epoch)
        total = self.samples_per_rank * self.world_size
        if total > len(order):
            order = np.resize(order, total)  # wraps around, like DistributedSampler
        order = order[:total]
        keys = order + draw_counts(order) * self.num_samples
        return order[self.rank::self.world_size], keys[self.rank::self.world_size]

    def batch(self, epoch: int, position: int) -> np.ndarray:
        """Indices of batch number `position` of `epoch` on this rank."""
        if not 0 <= position < len(self):
            raise IndexError(f"batch {position} out of range for {len(self)} batches")
        start = position * self.batch_size
        return self.rank_indices(epoch)[start:start + self.batch_size]

    def batches(self, epoch: int, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(position, indices) for each batch of `epoch` from batch `start` on."""
        for position, indices, _ in self.keyed_batches(epoch, start):
            yield position, indices


def draw_counts(order: np.ndarray) -> np.ndarray:
    """For each entry of `order`, how many times its value occurred before it (0 the first
    time), vectorised."""
    order = np.asarray(order, dtype=np.int64)
    by_value = np.argsort(order, kind="stable")
    values = order[by_value]
    new_run = np.r_[True, values[1:] != values[:-1]]
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(values)), 0))
    counts = np.empty(len(order), dtype=np.int64)
    counts[by_value] = np.arange(len(values)) - run_start
    return counts
