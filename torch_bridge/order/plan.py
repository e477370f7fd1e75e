"""EpochPlan: the single source of sample order for every backend (numpy only).

Order, sharding and batching are pure functions of (seed, epoch, rank, world size), so
both backends see the same samples in the same order and resume is exact: the state of a
pass is just (epoch, batches consumed).

Augmentation keys (`keyed_batches`): a sample's random parameters are drawn from
(seed, epoch, key) with key = index + draw * num_samples, where `draw` counts the times the
index already occurred earlier in the epoch's (padded) order. A first draw's key is its index;
a sample drawn again (balanced sampling with replacement, the wrap-around padding of the last
ranks) gets parameters of its own instead of a copy of the first draw's.

Elastic resume (`ResumedEpoch`, `remaining_span`): under DDP every rank has consumed the same
number of batches, so the entries the old ranks yielded are a prefix of the epoch's padded
global order (rank r's first c*B entries are the global positions r + W*t, t < c*B). What is
left is therefore one span [start, stop) of the epoch's order, whatever the old world size,
batch size or drop_last; a loader with another layout shards and batches that span as it
would a whole epoch, each entry keeping its augmentation key. Padding copies added to even
out the new ranks are keyed as further draws of their index.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class Sampler(Protocol):
    """An order strategy (see torch_bridge.order.sampling): the global order of an epoch, a pure
    function of (plan.seed, epoch), the same on every rank. A sampler whose order does not
    depend on the world size and batch size sets `order_depends_on_layout = False`, which
    allows elastic resume mid-epoch; one whose order depends on some of them only may name
    those in `layout_fields` (e.g. ("world_size",)): a mid-epoch state then resumes under
    a layout that differs in the others."""

    def order(self, plan: EpochPlan, epoch: int) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ResumedEpoch:
    """What is left of `epoch` after an elastic resume: entries [start, stop) of the epoch's
    global order (`EpochPlan.order`, before padding), each with the key it had there."""

    epoch: int
    start: int
    stop: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.stop:
            raise ValueError(f"resumed span must have 0 <= start <= stop, got "
                             f"[{self.start}, {self.stop})")

    def to_state(self) -> dict[str, int]:
        return {"start": self.start, "stop": self.stop}


@dataclass(frozen=True)
class EpochPlan:
    """Which dataset indices a rank reads in which batch of an epoch.

    Sharding follows torch's DistributedSampler: the epoch's order is padded by wrapping
    around to a multiple of `world_size` (or truncated when `drop_last`), then rank r takes
    every `world_size`-th index starting at r. Every rank gets the same number of batches.
    With `drop_last` the last incomplete batch of each rank is dropped too.

    `sampler` (optional, needs `shuffle`) replaces the shuffled permutation with another
    order strategy, e.g. class-balanced or source-aware sampling (torch_bridge.order.sampling).

    `resumed` (set by `set_resumed`, the plan's one mutable part: the Loader sets it in
    load_state_dict and the engines, which hold this plan, see it through `keyed_batches`)
    replaces one epoch by what an elastic resume left of it; `num_batches(epoch)` counts it.
    """

    num_samples: int
    batch_size: int
    seed: int = 0
    shuffle: bool = True
    drop_last: bool = False
    rank: int = 0
    world_size: int = 1
    sampler: Sampler | None = None
    resumed: ResumedEpoch | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.num_samples <= 0:
            raise ValueError(f"num_samples must be positive, got {self.num_samples}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        if not -2**63 <= self.seed < 2**63:  # wider seeds would alias others (64-bit state)
            raise ValueError(f"seed must be an int in [-2**63, 2**63), got {self.seed}")
        if self.world_size <= 0 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, world_size); got rank={self.rank}, "
                             f"world_size={self.world_size}")
        if self.drop_last and self.samples_per_rank < self.batch_size:
            raise ValueError(
                f"drop_last=True with batch_size={self.batch_size} leaves no batch: "
                f"{self.num_samples} samples give each of the {self.world_size} rank(s) "
                f"{self.samples_per_rank} samples per epoch, fewer than batch_size; "
                f"lower batch_size or set drop_last=False")
        if self.sampler is not None and not self.shuffle:
            raise ValueError("a sampler draws a random order per epoch; it needs shuffle=True")

    @property
    def samples_per_rank(self) -> int:
        """Entries of a whole epoch on this rank (the same on every rank)."""
        return layout_counts(self.num_samples, world_size=self.world_size,
                             batch_size=self.batch_size, drop_last=self.drop_last)[0]

    @property
    def largest_batch(self) -> int:
        """The most entries any batch of this plan holds: batch_size, or this rank's whole
        epoch where that is smaller (a resumed epoch is never longer than a whole one)."""
        return min(self.batch_size, self.samples_per_rank)

    def __len__(self) -> int:
        """Batches of a whole epoch on this rank (the same on every rank)."""
        return layout_counts(self.num_samples, world_size=self.world_size,
                             batch_size=self.batch_size, drop_last=self.drop_last)[1]

    def num_batches(self, epoch: int) -> int:
        """Batches of `epoch` on this rank: `len(self)`, or for the epoch an elastic resume
        replaced, the batches of what is left of it (the same on every rank)."""
        span = self._span(epoch)
        if span is None:
            return len(self)
        return layout_counts(span[1] - span[0], world_size=self.world_size,
                             batch_size=self.batch_size, drop_last=self.drop_last)[1]

    def set_resumed(self, resumed: ResumedEpoch | None) -> None:
        """Replace epoch `resumed.epoch` by that span of its order (None: no epoch is)."""
        if resumed is not None:
            available = len(self.order(resumed.epoch))
            if resumed.stop > available:
                raise ValueError(f"resumed span [{resumed.start}, {resumed.stop}) exceeds "
                                 f"the {available} entries of epoch {resumed.epoch}")
        object.__setattr__(self, "resumed", resumed)

    def resume_after(self, epoch: int, *, world_size: int, batch_size: int, drop_last: bool,
                     consumed: int, span: tuple[int, int] | None = None) -> ResumedEpoch:
        """What is left of `epoch` once every rank of another layout (`world_size`,
        `batch_size`, `drop_last`) consumed `consumed` batches of `span` of the epoch's
        order (None: all of it); ValueError when this plan's sampler ties the order to
        a layout field that differs."""
        if self.sampler is not None:
            _check_layout(self.sampler, {"world_size": world_size, "batch_size": batch_size,
                                         "drop_last": drop_last},
                          {"world_size": self.world_size, "batch_size": self.batch_size,
                           "drop_last": self.drop_last})
        start, stop = span if span is not None else (0, len(self.order(epoch)))
        start, stop = remaining_span(start, stop, world_size=world_size,
                                     batch_size=batch_size, drop_last=drop_last,
                                     consumed=consumed)
        return ResumedEpoch(epoch, start, stop)

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
        count = self.num_batches(epoch)
        if not 0 <= start <= count:
            raise ValueError(f"start batch {start} out of range for {count} batches")
        indices, keys = self._rank_share(epoch)
        for position in range(start, count):
            share = slice(position * self.batch_size, (position + 1) * self.batch_size)
            yield position, indices[share], keys[share]

    def _span(self, epoch: int) -> tuple[int, int] | None:
        resumed = self.resumed
        if resumed is None or resumed.epoch != epoch:
            return None
        return resumed.start, resumed.stop

    def _rank_share(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, augmentation keys) of this rank's share of `epoch`."""
        order = self.order(epoch)
        span = self._span(epoch)
        start, stop = span if span is not None else (0, len(order))
        per_rank = self.samples_per_rank if span is None else layout_counts(
            stop - start, world_size=self.world_size, batch_size=self.batch_size,
            drop_last=self.drop_last)[0]
        indices, keys = padded_span(order, start, stop, per_rank * self.world_size,
                                    self.num_samples)
        return indices[self.rank::self.world_size], keys[self.rank::self.world_size]


def _check_layout(sampler: Sampler, old: dict[str, Any], new: dict[str, Any]) -> None:
    """ValueError when the sampler's order depends on a layout field (world_size,
    batch_size, drop_last) that differs between the `old` layout and the `new` one: none
    when `order_depends_on_layout` is False, else its `layout_fields` (default: all)."""
    fields = tuple(getattr(sampler, "layout_fields", tuple(old))) \
        if getattr(sampler, "order_depends_on_layout", True) else ()
    if all(old[k] == new[k] for k in fields):
        return
    options = ", ".join(f"{k}={v!r}" for k, v in sampler.describe().items())
    layout = ", ".join(f.replace("_", " ") if f != "drop_last" else f for f in fields)
    raise ValueError(
        f"{options or 'this sampler'} lays each epoch out for one {layout}: a state saved "
        f"mid-epoch under {_fields(old)} cannot continue under {_fields(new)}; keep "
        f"{', '.join(fields)}, or resume from a state saved at an epoch boundary "
        f"(batches_consumed 0)")


def _fields(layout: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in layout.items())


def draw_counts(order: np.ndarray) -> np.ndarray:
    """For each entry of `order`, how many times its value occurred before it (0 the first
    time), vectorised."""
    order = np.asarray(order, dtype=np.int64)
    if _distinct(order):  # a permutation (uniform sampling): no value repeats
        return np.zeros(len(order), dtype=np.int64)
    by_value = np.argsort(order, kind="stable")
    values = order[by_value]
    new_run = np.r_[True, values[1:] != values[:-1]]
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(values)), 0))
    counts = np.empty(len(order), dtype=np.int64)
    counts[by_value] = np.arange(len(values)) - run_start
    return counts


def _distinct(order: np.ndarray) -> bool:
    """Whether no value of `order` (sample indices) repeats: one linear pass over a map of
    the values, where the sort is n log n."""
    if len(order) == 0:
        return True
    if order.min() < 0:
        return False
    seen = np.zeros(int(order.max()) + 1, dtype=bool)
    seen[order] = True
    return int(np.count_nonzero(seen)) == len(order)


def layout_counts(entries: int, *, world_size: int, batch_size: int,
                  drop_last: bool) -> tuple[int, int]:
    """(entries per rank, batches per rank) when `entries` are sharded like
    DistributedSampler (padded up to a multiple of `world_size`, or truncated with
    `drop_last`, which also drops each rank's incomplete last batch)."""
    if drop_last:
        per_rank = entries // world_size
        return per_rank, per_rank // batch_size
    per_rank = -(-entries // world_size)
    return per_rank, -(-per_rank // batch_size)


def remaining_span(start: int, stop: int, *, world_size: int, batch_size: int,
                   drop_last: bool, consumed: int) -> tuple[int, int]:
    """The span of an epoch's order still to yield once every rank of a layout consumed
    `consumed` batches of span [start, stop): the old ranks yielded the first
    world_size * consumed * batch_size entries of the padded span; the padding they had not
    reached (and, with drop_last, what they would never have yielded) is not carried over.

    Returns:
        (start, stop) of the remaining entries, in the epoch's order.
    """
    per_rank, batches = layout_counts(stop - start, world_size=world_size,
                                      batch_size=batch_size, drop_last=drop_last)
    if not 0 <= consumed <= batches:
        raise ValueError(f"batches_consumed {consumed} out of range for the {batches} "
                         f"batches per rank of world_size={world_size}, "
                         f"batch_size={batch_size}, drop_last={drop_last}")
    yielded = batches * batch_size if drop_last else per_rank  # per rank, whole epoch
    end = start + min(stop - start, world_size * yielded)
    return min(start + world_size * consumed * batch_size, end), end


def padded_span(order: np.ndarray, start: int, stop: int, total: int,
                num_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Entries [start, stop) of an epoch's `order` with their augmentation keys, wrapped
    around to `total` entries (or truncated to them). A wrapped copy is keyed as a further
    draw of its index: its draw counts every earlier occurrence in the whole epoch's order
    and earlier copies, so for the whole order this is DistributedSampler's padding with
    the plan's keys (see the module doc).

    Returns:
        (indices, keys), both int64 of length `total`.
    """
    keys = order + draw_counts(order) * num_samples
    indices, keys = order[start:stop], keys[start:stop]
    if total <= len(indices):
        return indices[:total], keys[:total]
    copies = np.resize(indices, total)[len(indices):]
    draws = draw_counts(np.concatenate([order, copies]))[len(order):]
    return np.concatenate([indices, copies]), np.concatenate([keys, copies + draws *
                                                              num_samples])
