"""Shard-aware order (`order="shards"`): shards shuffled, samples shuffled within a window
of shards, each rank reading its own run of shards (numpy only).

Per epoch, as a pure function of (seed, epoch, world size):
1. the shards are put in a random order, and the samples listed shard after shard (members
   in their stored order) form one stream;
2. the stream is cut into `world_size` consecutive parts of equal length (one sample more
   for the first `num_samples % world_size` parts), one per rank, so a shard is split
   between two ranks at most at the cuts;
3. each part is walked in windows of `window` consecutive shards (counted from the part's
   first shard) and the samples of each window are shuffled (MosaicML Streaming's block
   shuffle, with blocks of whole shards);
4. the parts are interleaved into the global order the way `EpochPlan.rank_indices` shards
   it (rank r takes every world_size-th entry), so rank r yields part r, window by window.

A rank therefore reads at most `window` shards at a time (two windows across a window
boundary) and every shard it reads is read by no other rank in that epoch (except the two
ranks sharing a cut shard); the plan's padding to equal rank lengths takes a few first
samples of the epoch, one per padded rank. The order is a permutation of all indices, so a
pass with one rank and drop_last=False yields every index exactly once. It depends on the
world size but not on the batch size or drop_last: a state saved mid-epoch resumes under
another batch size, not under another world size (`layout_fields`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch_bridge.order.plan import EpochPlan

DEFAULT_WINDOW = 4
_SHARD_ORDER_TAG = 0x5348  # separates this sampler's random stream from the others


@dataclass(frozen=True, eq=False)
class ShardWindows:
    """The shard-aware order over `shard_ids` (the shard of each sample, ints >= 0; kept
    renumbered 0..n-1 in their order, so ids without samples do not count), with shuffle
    windows of `window` shards (see the module doc)."""

    shard_ids: np.ndarray
    window: int = DEFAULT_WINDOW
    # derived in __post_init__: samples per shard, and the indices grouped shard after
    # shard (None when shard_ids are sorted, as a listing of shards has them: 0..n-1)
    _counts: np.ndarray = field(init=False, repr=False)
    _by_shard: np.ndarray | None = field(init=False, repr=False)
    order_depends_on_layout = True  # class attributes, not fields
    layout_fields = ("world_size",)  # the layout fields the order depends on

    def __post_init__(self) -> None:
        ids = np.asarray(self.shard_ids)
        if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu" or ids.min() < 0:
            raise ValueError(f"shard_ids must be a non-empty 1-d array of ints >= 0, got "
                             f"shape {ids.shape} dtype {ids.dtype}")
        ids = np.unique(ids, return_inverse=True)[1].astype(np.int64)  # 0..n-1, a copy
        ids.flags.writeable = False
        object.__setattr__(self, "shard_ids", ids)
        object.__setattr__(self, "_counts", np.bincount(ids).astype(np.int64))
        object.__setattr__(self, "_by_shard", None if np.all(ids[1:] >= ids[:-1]) else
                           np.argsort(ids, kind="stable").astype(np.int64))
        if isinstance(self.window, bool) or not isinstance(self.window, (int, np.integer)) \
                or self.window < 1:
            raise ValueError(f"shard_window must be an int >= 1, got {self.window!r}")
        object.__setattr__(self, "window", int(self.window))

    def describe(self) -> dict[str, Any]:
        return {"order": "shards", "shard_window": self.window}

    def order(self, plan: EpochPlan, epoch: int) -> np.ndarray:
        if len(self.shard_ids) != plan.num_samples:
            raise ValueError(f"shard_ids has {len(self.shard_ids)} entries for "
                             f"{plan.num_samples} samples")
        rng = np.random.default_rng([plan.seed & 0xFFFFFFFFFFFFFFFF, epoch, _SHARD_ORDER_TAG])
        stream, shard_pos = _shard_stream(rng, self._by_shard, self._counts)
        lengths = _part_lengths(len(stream), plan.world_size)
        part = np.repeat(np.arange(plan.world_size), lengths)
        starts = np.r_[0, np.cumsum(lengths)[:-1]]
        first = shard_pos[np.minimum(starts, len(stream) - 1)]  # an empty part's is unused
        # (part, window) numbers consecutive runs of the stream, in stream order
        window = part * (len(self._counts) + 1) + (shard_pos - first[part]) // self.window
        walk = _shuffle_runs(rng, window)
        offset = np.arange(len(stream)) - starts[part]  # position within the part
        order = np.empty(len(stream), dtype=np.int64)
        order[part + plan.world_size * offset] = stream[walk]
        return order


def _shard_stream(rng: np.random.Generator, by_shard: np.ndarray | None,
                  counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices listed shard after shard in a random shard order, each entry's shard's
    position in that order); members keep their index order within a shard. O(n), no
    sort: `by_shard` lists the indices of shard 0, then 1, ... (None: 0..n-1); `counts`
    their sizes."""
    shard_order = rng.permutation(len(counts))
    sizes = counts[shard_order]
    first = (np.cumsum(counts) - counts)[shard_order]  # where each shard starts in by_shard
    shard_pos = np.repeat(np.arange(len(counts)), sizes)
    within = np.arange(len(shard_pos)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    grouped = np.repeat(first, sizes) + within
    return (grouped if by_shard is None else by_shard[grouped]), shard_pos


def _shuffle_runs(rng: np.random.Generator, runs: np.ndarray) -> np.ndarray:
    """A permutation of positions that shuffles within each run of equal, non-decreasing
    `runs` values and keeps the runs in place. The sort is stable, so tied random keys
    resolve the same way on every machine."""
    keys = (runs.astype(np.uint64) << np.uint64(32)) | \
        rng.integers(0, 1 << 32, size=len(runs), dtype=np.uint64)
    return np.argsort(keys, kind="stable")


def _part_lengths(entries: int, world: int) -> np.ndarray:
    """Entries of each rank's part: the plan's rank r takes global positions r, r + world,
    ... below `entries`."""
    lengths = np.full(world, entries // world, dtype=np.int64)
    lengths[:entries % world] += 1
    return lengths
