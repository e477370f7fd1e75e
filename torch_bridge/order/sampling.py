"""Sampling strategies for EpochPlan: class-balanced and source-aware orders (numpy only),
and the choice of sampler from make_loader's `Sampling` (torch_bridge.order.options; the
shard-aware order of order="shards" lives in torch_bridge.order.shard_order, repeated
augmentation in torch_bridge.order.repeated).

A sampler replaces the plain shuffled permutation of `EpochPlan.order`. Like the plan, it
is a pure function of (seed, epoch): every rank computes the same global order, so sharding,
determinism and exact resume (state = epoch + batches consumed) carry over unchanged.

Both samplers draw with replacement where balance requires it, so the contract's "one pass
yields every index exactly once" does not hold for them: repeating the rare classes or the
small source is the point of balanced sampling. A sample drawn twice in an epoch gets new
augmentation parameters for each draw: they depend on (seed, epoch, key), where the plan's
key is index + draw * num_samples (torch_bridge.order.plan), the same on both backends.

`order_depends_on_layout`: whether a sampler's order depends on the world size and batch
size. Class-balanced draws do not, so a state saved mid-epoch resumes under another world
size (elastic resume, torch_bridge.order.plan); source-aware orders are laid out per rank and
batch, so such a state resumes only under the same layout (or at an epoch boundary).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from torch_bridge.order.shard_order import DEFAULT_WINDOW, ShardWindows

if TYPE_CHECKING:
    from torch_bridge.order.options import Sampling
    from torch_bridge.order.plan import EpochPlan
    from torch_bridge.order.repeated import Repeated

_CLASS_BALANCED_TAG = 0x434C  # separates the samplers' random streams from the plain shuffle
_SOURCE_AWARE_TAG = 0x5352


def _rng(seed: int, epoch: int, tag: int) -> np.random.Generator:
    return np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, epoch, tag])


def _int_array(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a non-empty 1-d integer array, got "
                         f"shape {array.shape} dtype {array.dtype}")
    array = array.astype(np.int64)  # a private copy
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class ClassBalanced:
    """Each epoch draws `num_samples` indices with replacement, index i with probability
    proportional to 1 / count(labels[i]): every class is equally likely in every draw,
    whatever its size."""

    labels: np.ndarray
    order_depends_on_layout = False  # a class attribute, not a field

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _int_array(self.labels, "labels"))

    def describe(self) -> dict[str, Any]:
        return {"sampling": "class_balanced"}

    def weights(self) -> np.ndarray:
        """Probability of drawing each index; sums to 1."""
        _, inverse, counts = np.unique(self.labels, return_inverse=True, return_counts=True)
        weights = 1.0 / (counts[inverse] * len(counts))
        return weights / weights.sum()

    def order(self, plan: EpochPlan, epoch: int) -> np.ndarray:
        _check_length(self.labels, plan, "labels")
        rng = _rng(plan.seed, epoch, _CLASS_BALANCED_TAG)
        return rng.choice(plan.num_samples, size=plan.num_samples, replace=True,
                          p=self.weights()).astype(np.int64)


@dataclass(frozen=True, eq=False)
class SourceAware:
    """Each batch on each rank holds at least `min_per_source` samples of every source.

    Per epoch every source's indices are shuffled and dealt out as the batches' quotas; the
    remaining slots take the indices not yet used, shuffled together. A source too small for
    its quotas starts over with a fresh permutation (sampling with replacement); slots left
    when every index was used (padding to equal rank lengths) do the same over all indices.
    Positions inside a batch are shuffled. The batches are laid out in the global order the
    way `EpochPlan.rank_indices` shards it (rank r takes every world_size-th index), so the
    guarantee holds per rank. The last, shorter batch of a pass (drop_last=False) holds
    min(min_per_source, its size // number of sources) of each source.
    """

    source_ids: np.ndarray
    min_per_source: int
    batch_size: int
    order_depends_on_layout = True  # a class attribute, not a field

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_ids", _int_array(self.source_ids, "source_ids"))
        if isinstance(self.min_per_source, bool) or not isinstance(self.min_per_source, int) \
                or self.min_per_source < 1:
            raise ValueError(f"min_per_source must be a positive int, got "
                             f"{self.min_per_source!r}")
        needed = self.min_per_source * self.n_sources
        if needed > self.batch_size:
            raise ValueError(f"min_per_source={self.min_per_source} with {self.n_sources} "
                             f"sources needs {needed} samples per batch but batch_size is "
                             f"{self.batch_size}")

    @property
    def n_sources(self) -> int:
        return len(np.unique(self.source_ids))

    def describe(self) -> dict[str, Any]:
        return {"min_per_source": self.min_per_source}

    def order(self, plan: EpochPlan, epoch: int) -> np.ndarray:
        _check_length(self.source_ids, plan, "source_ids")
        if plan.batch_size != self.batch_size:
            raise ValueError(f"SourceAware built for batch_size {self.batch_size}, plan has "
                             f"{plan.batch_size}")
        rng = _rng(plan.seed, epoch, _SOURCE_AWARE_TAG)
        pools = [np.flatnonzero(self.source_ids == s) for s in np.unique(self.source_ids)]
        shapes = _row_shapes(plan, self.min_per_source, len(pools))
        quotas, rest = _deal(rng, pools, shapes)
        blocks, taken = [], [0] * (len(pools) + 1)
        for n_rows, size, quota in shapes:
            parts = []
            for k, stream in enumerate(quotas + [rest]):
                width = quota if k < len(pools) else size - quota * len(pools)
                parts.append(stream[taken[k]:taken[k] + n_rows * width].reshape(n_rows, width))
                taken[k] += n_rows * width
            block = rng.permuted(np.concatenate(parts, axis=1), axis=1)
            blocks.append(_interleave(block, plan.world_size))
        return np.concatenate(blocks).astype(np.int64)


def _check_length(values: np.ndarray, plan: EpochPlan, name: str) -> None:
    if len(values) != plan.num_samples:
        raise ValueError(f"{name} has {len(values)} entries for {plan.num_samples} samples")


def _row_shapes(plan: EpochPlan, min_per_source: int, n_sources: int) -> list[tuple]:
    """(rows, batch size, quota per source) of the full batches and of the last, shorter
    one; rows count the batches of all ranks, ordered (batch, rank)."""
    full, last = divmod(plan.samples_per_rank, plan.batch_size)
    shapes = [(full * plan.world_size, plan.batch_size, min_per_source)] if full else []
    if last:
        shapes.append((plan.world_size, last, min(min_per_source, last // n_sources)))
    return shapes


def _deal(rng: np.random.Generator, pools: list[np.ndarray],
          shapes: list[tuple]) -> tuple[list[np.ndarray], np.ndarray]:
    """One stream per source holding its quota slots, and a stream for the free slots:
    the indices the quotas left unused, shuffled, then fresh permutations of all."""
    quotas, unused = [], []
    for pool in pools:
        need = sum(n_rows * quota for n_rows, _, quota in shapes)
        stream = _stream(rng, pool, need)
        quotas.append(stream[:need])
        unused.append(stream[need:len(pool)])
    free = sum(n_rows * (size - quota * len(pools)) for n_rows, size, quota in shapes)
    rest = rng.permutation(np.concatenate(unused))
    if len(rest) < free:
        everything = np.concatenate(pools)
        rest = np.concatenate([rest, _stream(rng, everything, free - len(rest))])
    return quotas, rest[:free]


def _stream(rng: np.random.Generator, pool: np.ndarray, count: int) -> np.ndarray:
    """A permutation of `pool`, followed by fresh ones until `count` items are there."""
    laps = max(1, -(-count // len(pool)))
    return np.concatenate([rng.permutation(pool) for _ in range(laps)])


def _interleave(rows: np.ndarray, world: int) -> np.ndarray:
    """Rows ordered (batch, rank) -> the global order whose rank r share, taken as
    order[r::world], is rank r's rows one after another."""
    n_rows, size = rows.shape
    return rows.reshape(n_rows // world, world, size).transpose(0, 2, 1).reshape(-1)


def sampler_for(sampling: Sampling, *, source, multi_source: bool, batch_size: int,
                shuffle: bool) -> ClassBalanced | SourceAware | Repeated | ShardWindows | None:
    """The sampler make_loader's `sampling` asks for (None: the plain shuffle). `source`
    provides `labels` / `source_ids` / `shard_ids`; ValueError naming the option for
    anything that cannot work on this data."""
    kind, min_per_source = sampling.kind, sampling.min_per_source
    shards = shard_sampler(sampling, source=source, shuffle=shuffle)
    if shards is not None:
        return shards
    if kind == "repeated" and min_per_source is None and shuffle:
        from torch_bridge.order.repeated import Repeated
        return Repeated(sampling.repeats)
    if kind == "repeated":
        raise ValueError("sampling='repeated' needs shuffle=True and no min_per_source")
    if kind == "uniform" and min_per_source is None:
        return None
    if kind == "class_balanced" and min_per_source is not None:
        raise ValueError("sampling='class_balanced' and min_per_source cannot be combined; "
                         "choose one")
    option = "sampling='class_balanced'" if min_per_source is None else "min_per_source"
    if not shuffle:
        raise ValueError(f"{option} draws a random order per epoch; it needs shuffle=True")
    if min_per_source is None:
        return ClassBalanced(_source_array(source, "labels", option))
    if not multi_source:
        raise ValueError("min_per_source needs `data` as a list of folders, one per source")
    return SourceAware(_source_array(source, "source_ids", option), min_per_source,
                       batch_size)


def shard_sampler(sampling: Sampling, *, source, shuffle: bool) -> ShardWindows | None:
    """The shard-aware order for order="shards" (torch_bridge.order.shard_order), None for
    order="global"; ValueError naming the options for a combination that cannot work."""
    kind = sampling.kind
    if sampling.order == "global":
        return None
    if kind != "uniform":
        why = "draws with replacement from every shard" if kind == "class_balanced" \
            else "deals the copies of an image to different ranks"
        raise ValueError(f"order='shards' and sampling={kind!r} cannot be combined: "
                         f"sampling={kind!r} {why}, order='shards' gives each rank its "
                         f"own shards; choose one")
    if sampling.min_per_source is not None:
        raise ValueError("order='shards' and min_per_source cannot be combined: "
                         "min_per_source lays out every batch over all sources, "
                         "order='shards' reads a few shards at a time; choose one")
    if not shuffle:
        raise ValueError("order='shards' shuffles the shards every epoch; it needs "
                         "shuffle=True (with shuffle=False use order='global', which reads "
                         "the shards in their listed order)")
    shard_ids = getattr(source, "shard_ids", None)
    if shard_ids is None:
        what = "this data" if source is None else type(source).__name__
        raise ValueError(f"order='shards' needs data in WebDataset tar shards (a source "
                         f"that knows the shard of each sample); {what} has no shards; "
                         f"use order='global'")
    return ShardWindows(np.asarray(shard_ids), DEFAULT_WINDOW if sampling.shard_window is None
                        else sampling.shard_window)


def _source_array(source, name: str, option: str) -> np.ndarray:
    values = getattr(source, name, None)
    if values is None:
        raise ValueError(f"{option} needs per-sample {name}, which this modality lacks")
    return np.asarray(values)
