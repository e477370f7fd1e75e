"""Options as objects: a modality's make_loader options are the fields of a few frozen
dataclasses (its `option_groups`, e.g. the image recipe, decode, source and store options),
so each option's default and type are written once, in its dataclass.

A group may hold nested groups (`dali_pipes.option_groups`): the image recipe holds `crop`,
`photometric`, `policy`, `erasing`, `mixing` and `output`. Each option then has two
spellings: its flat keyword (`mixup=0.2`, a shorthand) and its group (`mixing=Mixing(...)`
or `mixing={"mixup": 0.2}`); they must agree when both are given.

`option_fields` lists a group's options by flat keyword (a field with
`metadata={"option": False}` is derived, not an option); `split_options` expands the group
keywords and sorts the options a user gave into their groups, keeping only what was given,
so a recipe preset can fill the rest and an explicit option always wins over it, even one
given at its default value.
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from dali_pipes.option_groups import expand, leaves, nested


def option_fields(group: type) -> dict[str, dataclasses.Field]:
    """The option fields of an options dataclass (nested groups included), by flat
    keyword, in declaration order."""
    return {name: leaf.field for name, leaf in leaves(group).items()}


def option_defaults(groups: Sequence[type]) -> dict[str, Any]:
    """Every option of `groups` with its default, by flat keyword."""
    return {name: leaf.default for group in groups for name, leaf in leaves(group).items()}


def option_types(groups: Sequence[type]) -> dict[str, Any]:
    """Every option of `groups` with its (resolved) annotation, by flat keyword."""
    out: dict[str, Any] = {}
    for group in groups:
        for name, leaf in leaves(group).items():
            out[name] = _hints(leaf.owner)[leaf.field.name]
    return out


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def group_keywords(groups: Sequence[type]) -> dict[str, type]:
    """The keywords of the groups nested in `groups` (`mixing` -> `Mixing`)."""
    return {name: sub for group in groups for name, sub in nested(group).items()}


def split_options(given: Mapping[str, Any], groups: Sequence[type], *, rest: bool = False,
                  where: str = "make_loader") -> dict[type | None, dict[str, Any]]:
    """The options given, group keywords expanded, sorted into their groups (each group:
    only what was given).

    Args:
        given: option name -> value, as make_loader received them.
        groups: the modality's option dataclasses.
        rest: keep the options of no group under the key None (else they are an error).
        where: what error messages name as taking the options.

    Returns:
        group -> {flat keyword: value}; ValueError when a flat keyword and its group
        disagree, or (without `rest`) naming an option no group has (the registry names
        unknown options before this runs, so that is a programming error).
    """
    given = expand(given, groups, where=where)
    out: dict[type | None, dict[str, Any]] = {group: {} for group in groups}
    out[None] = {}
    owner = {name: group for group in groups for name in leaves(group)}
    for name, value in given.items():
        if name not in owner and not rest:
            raise ValueError(f"unknown option {name!r}; known: {', '.join(owner)}")
        out[owner.get(name)][name] = value
    return out
