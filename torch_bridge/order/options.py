"""`Sampling`: which samples an epoch draws and in which order, make_loader's `sampling=`
as one value (numpy only).

make_loader takes `sampling="repeated"` (a kind) or a `Sampling`; its flat keywords
`repeats`, `min_per_source`, `order` and `shard_window` are shorthands of this value's
fields, refused when they disagree with a `Sampling` given beside them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dali_pipes.option_groups import build, merge, shorthand

SamplingKind = Literal["uniform", "class_balanced", "repeated"]
ORDERS = ("global", "shards")


@dataclass(frozen=True)
class Sampling:
    """How the plan draws an epoch (checked when made; the rules that need the data, such
    as shards or a list of folders, are checked by make_loader).

    `kind`: "uniform" (each index once); "class_balanced" (as many draws as samples, with
    replacement, every class equally likely); "repeated" (DeiT's repeated augmentation:
    each shuffled index `repeats` times, default 3, each with its own augmentation).
    `min_per_source`: with `data` a list of folders, every batch on every rank holds at
    least that many samples of each source. `order`: "global" (one permutation of all
    samples) or "shards" (WebDataset shards only: shards shuffled, each rank reading its
    own run of them, samples shuffled within a window of `shard_window` shards, default 4).
    Each field is also a make_loader keyword (`kind`'s is `sampling`)."""

    kind: SamplingKind = shorthand("sampling", "uniform")
    repeats: int = 3
    min_per_source: int | None = None
    order: Literal["global", "shards"] = "global"
    shard_window: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "class_balanced", "repeated"):
            raise ValueError(f"sampling must be 'uniform' or 'class_balanced' or 'repeated', "
                             f"got {self.kind!r}")
        if self.repeats != 3 and self.kind != "repeated":
            raise ValueError(f"repeats={self.repeats!r} applies only with sampling='repeated'")
        if self.order not in ORDERS:
            raise ValueError(f"order must be 'global' or 'shards', got {self.order!r}")
        if self.order == "global" and self.shard_window is not None:
            raise ValueError(f"shard_window={self.shard_window!r} applies only with "
                             f"order='shards' (order is 'global')")


# make_loader's flat keywords of `Sampling`, besides `sampling` itself
SHORTHANDS = ("repeats", "min_per_source", "order", "shard_window")


def sampling_of(value: str | Sampling | Mapping[str, Any], given: Mapping[str, Any], *,
                where: str = "make_loader") -> Sampling:
    """The `Sampling` of make_loader's `sampling=` and the shorthands it was given.

    Args:
        value: a kind ("uniform", ...), a `Sampling` or a mapping of its fields.
        given: the shorthands given (`repeats`, `min_per_source`, `order`, `shard_window`).
        where: what error messages name.

    Returns:
        The value; ValueError when a shorthand disagrees with a `Sampling` given, or for
        a value `Sampling` refuses.
    """
    if isinstance(value, str):
        return build(Sampling, {"sampling": value, **given})
    return build(Sampling, {**given, **merge("sampling", Sampling, value, given, where=where)})
