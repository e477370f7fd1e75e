"""Reading a Loader's state_dict back: version, fields, and where to continue (no torch).

A state (version 2) holds the position (`epoch`, `batches_consumed`), the layout it was
saved under (`world_size`, `batch_size`, `drop_last`, and `resumed`: the span of the
epoch's order that layout covered after an elastic resume, else None), and `order`: what
defines the epoch's global order (data set listing, sample count, seed, shuffle, modality,
sampler options) with its sha256 `fingerprint`. The order must match the loader's; the
layout may differ (elastic resume, torch_bridge.order.plan). Version-1 states, whose fingerprint
also covered the layout, still load.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from torch_bridge.order.plan import EpochPlan, ResumedEpoch, layout_counts

STATE_VERSION = 2
LAYOUT_KEYS = ("world_size", "batch_size", "drop_last")


@dataclass(frozen=True)
class SavedState:
    """A state_dict, checked and brought to the current version's fields."""

    epoch: int
    consumed: int
    layout: tuple[int, int, bool] | None  # (world_size, batch_size, drop_last); None: v1
    order: dict[str, Any] | None  # None: a version-1 state without one
    fingerprint_ok: bool  # the state's fingerprint is that of its own order
    span: tuple[int, int] | None  # `resumed` of the state
    legacy: dict[str, Any]  # the top-level fields a state without `order` is checked on


def fingerprint(order: dict[str, Any]) -> str:
    """sha256 of an order spec (JSON with sorted keys)."""
    return hashlib.sha256(json.dumps(order, sort_keys=True).encode()).hexdigest()


def read_state(state: dict[str, Any]) -> SavedState:
    """Check `state`'s version and fields; ValueError naming the field otherwise.

    Args:
        state: what `Loader.state_dict()` returned (version 1 or 2).

    Returns:
        The state as a SavedState.
    """
    if not isinstance(state, dict):
        raise ValueError(f"load_state_dict: expected the dict state_dict() returned, got "
                         f"{type(state).__name__}")
    version = state.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"load_state_dict: state['version'] is {version!r}; a Loader state "
                         f"has an int version from 1 to {STATE_VERSION}")
    if version > STATE_VERSION:
        raise ValueError(f"load_state_dict: the state has version {version}, newer than "
                         f"this torch_bridge reads ({STATE_VERSION}); load it with the "
                         f"version that saved it")
    epoch, consumed = _int_field(state, "epoch"), _int_field(state, "batches_consumed")
    legacy = {k: state.get(k) for k in ("num_samples", "seed", "world_size", "num_batches")}
    if version == 1:
        return _read_v1(state, epoch, consumed, legacy)
    order = state.get("order")
    if not isinstance(order, dict) or not isinstance(state.get("fingerprint"), str):
        raise ValueError("load_state_dict: a version-2 state needs 'order' (a dict) and "
                         "'fingerprint' (a str)")
    return SavedState(epoch, consumed, _layout(state, "state"), dict(order),
                      fingerprint(order) == state["fingerprint"], _span(state.get("resumed")),
                      legacy)


def _read_v1(state: dict, epoch: int, consumed: int, legacy: dict) -> SavedState:
    """Version 1: the layout lived in `order` and its fingerprint covered it."""
    order = state.get("order")
    if "fingerprint" not in state or not isinstance(order, dict):
        return SavedState(epoch, consumed, None, None, True, None, legacy)
    ok = fingerprint(order) == state["fingerprint"]
    rest = {k: v for k, v in order.items() if k not in LAYOUT_KEYS}
    return SavedState(epoch, consumed, _layout(order, "state['order']"), rest, ok, None,
                      legacy)


def _layout(fields: dict, where: str) -> tuple[int, int, bool]:
    """(world_size, batch_size, drop_last) from `fields` (named `where` in errors)."""
    drop_last = fields.get("drop_last")
    if not isinstance(drop_last, bool):
        raise ValueError(f"load_state_dict: {where}['drop_last'] is {drop_last!r}, not a "
                         f"bool")
    return (_int_field(fields, "world_size", low=1, where=where),
            _int_field(fields, "batch_size", low=1, where=where), drop_last)


def _int_field(fields: dict, key: str, *, low: int = 0, where: str = "state") -> int:
    value = fields.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"load_state_dict: {where}[{key!r}] is {value!r}; expected an int "
                         f">= {low}")
    return value


def _span(resumed) -> tuple[int, int] | None:
    if resumed is None:
        return None
    if not isinstance(resumed, dict) or not all(
            isinstance(resumed.get(k), int) and not isinstance(resumed.get(k), bool)
            for k in ("start", "stop")) or not 0 <= resumed["start"] <= resumed["stop"]:
        raise ValueError(f"load_state_dict: state['resumed'] is {resumed!r}; expected None "
                         f"or {{'start': int, 'stop': int}} with 0 <= start <= stop")
    return resumed["start"], resumed["stop"]


def order_differences(saved: SavedState, plan: EpochPlan, order: dict[str, Any]
                      ) -> list[str]:
    """What differs between the order `saved` was made under and this loader's (`plan`
    and its `order` spec); empty when the state may be loaded."""
    mine = {"num_samples": plan.num_samples, "seed": plan.seed}
    if saved.order is None:  # a version-1 state without an order: its per-key fields
        mine.update(world_size=plan.world_size, num_batches=len(plan))
        return _differences(mine, saved.legacy, list(mine))
    theirs = {**saved.legacy, **saved.order}
    mine.update(order)
    keys = list(mine) + [k for k in saved.order if k not in mine]  # options only it has
    diffs = _differences(mine, theirs, keys)
    if diffs or not saved.fingerprint_ok:
        diffs.append("the order fingerprint differs")
    return diffs


def _differences(mine: dict, theirs: dict, keys: list[str]) -> list[str]:
    return [f"{key} is {theirs.get(key)!r} in the state but {mine.get(key)!r} in this "
            f"loader" for key in keys if theirs.get(key) != mine.get(key)]


def resume_point(saved: SavedState, plan: EpochPlan) -> tuple[ResumedEpoch | None, int]:
    """(the resumed epoch to set on `plan`, or None; the batch the next pass starts at).

    The same layout continues at the saved batch (within the saved span, if any); another
    layout gets what the old ranks had left of the epoch, from its first batch, unless
    nothing of the epoch was consumed (a fresh epoch of the new layout then)."""
    mine = (plan.world_size, plan.batch_size, plan.drop_last)
    if saved.layout is None or saved.layout == mine:
        resumed = None if saved.span is None else ResumedEpoch(saved.epoch, *saved.span)
        count = plan.num_batches(saved.epoch) if resumed is None else \
            _span_batches(plan, resumed)
        if saved.consumed > count:
            raise ValueError(f"load_state_dict: batches_consumed is {saved.consumed} but the "
                             f"epoch has {count} batches per rank")
        return resumed, saved.consumed
    if saved.consumed == 0 and saved.span is None:
        return None, 0
    world_size, batch_size, drop_last = saved.layout
    try:
        resumed = plan.resume_after(saved.epoch, world_size=world_size,
                                    batch_size=batch_size, drop_last=drop_last,
                                    consumed=saved.consumed, span=saved.span)
    except ValueError as exc:
        raise ValueError(f"load_state_dict: {exc}") from exc
    return resumed, 0


def _span_batches(plan: EpochPlan, resumed: ResumedEpoch) -> int:
    return layout_counts(resumed.stop - resumed.start, world_size=plan.world_size,
                         batch_size=plan.batch_size, drop_last=plan.drop_last)[1]
