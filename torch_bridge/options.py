"""Options as objects: a modality's make_loader options are the fields of a few frozen
dataclasses (its `option_groups`, e.g. the image recipe, decode, source and store options),
so each option's default and type are written once, in its dataclass.

`option_fields` lists a group's options (a field with `metadata={"option": False}` is
derived, not an option); `split_options` sorts the options a user gave into their groups,
keeping only what was given, so a recipe preset can fill the rest and an explicit option
always wins over it, even one given at its default value.
"""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any


def option_fields(group: type) -> dict[str, dataclasses.Field]:
    """The option fields of an options dataclass, by name, in declaration order."""
    return {f.name: f for f in dataclasses.fields(group) if f.metadata.get("option", True)}


def option_defaults(groups: Sequence[type]) -> dict[str, Any]:
    """Every option of `groups` with its default."""
    return {name: f.default for group in groups for name, f in option_fields(group).items()}


def option_types(groups: Sequence[type]) -> dict[str, Any]:
    """Every option of `groups` with its (resolved) annotation."""
    out: dict[str, Any] = {}
    for group in groups:
        hints = typing.get_type_hints(group)
        out.update({name: hints[name] for name in option_fields(group)})
    return out


def split_options(given: Mapping[str, Any], groups: Sequence[type], *, rest: bool = False
                  ) -> dict[type | None, dict[str, Any]]:
    """The options given, sorted into their groups (each group: only what was given).

    Args:
        given: option name -> value, as make_loader received them.
        groups: the modality's option dataclasses.
        rest: keep the options of no group under the key None (else they are an error).

    Returns:
        group -> {option name: value}; ValueError naming an option no group has, without
        `rest` (the registry names unknown options before this runs, so that is a
        programming error).
    """
    out: dict[type | None, dict[str, Any]] = {group: {} for group in groups}
    out[None] = {}
    owner = {name: group for group in groups for name in option_fields(group)}
    for name, value in given.items():
        if name not in owner and not rest:
            raise ValueError(f"unknown option {name!r}; known: {', '.join(owner)}")
        out[owner.get(name)][name] = value
    return out
