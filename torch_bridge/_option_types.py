"""Option values checked against the annotations of the function that takes them.

`make_loader`'s own options and every modality's options (read from the modality class's
constructor, see `torch_bridge.registry`) go through `check_options`, so a value of the
wrong type (`train="False"`, `size="224"`, `batch_size=2.0`, `seed=None`) is a TypeError
naming the option when the loader is made, never a mode nobody asked for.

What is checked: `int` (not bool; numpy integers pass), `float` (ints pass), `bool` (numpy
bools pass), `str`, `None`, `Literal[...]` (the type of its values), option dataclasses
(`Sampling`, `DaliBackend`: an instance), `Mapping[...]` (any mapping) and unions of these.
Annotations this module does not know (tuples, paths, `Any`) are left to the option's own
checks. An unannotated option whose default is a bool must be a bool.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

import numpy as np

from torch_bridge.options import option_types

_UNKNOWN = object()  # an annotation this module does not check


class OptionTypeError(TypeError, ValueError):
    """An option value of the wrong type (both a TypeError and a ValueError, so code that
    caught the ValueError an option's own check raised keeps working)."""


def annotations_of(func: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of `func`'s parameters (of every `__init__` in a class's
    MRO, nearest first, for a class whose constructor forwards `**options`).

    Args:
        func: a function or a class.

    Returns:
        Parameter name -> annotation; an unannotated parameter with a bool default maps
        to `bool`.
    """
    targets = [vars(c)["__init__"] for c in func.__mro__ if "__init__" in vars(c)] \
        if isinstance(func, type) else [func]
    # a modality's options taken through **options are the fields of its option groups
    out: dict[str, Any] = option_types(getattr(func, "option_groups", ()))
    for target in targets:
        hints = _hints(target)
        for name, param in inspect.signature(target).parameters.items():
            if name in hints:
                out.setdefault(name, hints[name])
            elif isinstance(param.default, bool):
                out.setdefault(name, bool)
    return out


def _hints(target: Callable[..., Any]) -> dict[str, Any]:
    """Each parameter's annotation evaluated on its own: one naming what is imported only
    for type checkers is left out, not every other with it."""
    out: dict[str, Any] = {}
    namespace = getattr(target, "__globals__", {})
    for name, hint in inspect.get_annotations(target).items():
        if isinstance(hint, str):
            try:
                hint = eval(hint, namespace)  # noqa: S307 - the module's own annotation
            except (NameError, TypeError, AttributeError):
                continue
        out[name] = hint
    return out


def check_options(func: Callable[..., Any], values: Mapping[str, Any], *,
                  where: str = "make_loader") -> None:
    """OptionTypeError naming the first option whose value does not fit its annotation.

    Args:
        func: the function (or class) whose parameters the options are.
        values: option name -> the value the user passed.
        where: what the message says took the options.
    """
    _check(annotations_of(func), values, where)


def check_group(group: type, values: Mapping[str, Any], *, where: str = "make_loader"
                ) -> None:
    """`check_options` for the flat keywords of an option group (`Sampling`'s `repeats`,
    ...), against the group's field annotations."""
    _check(option_types((group,)), values, where)


def _check(hints: Mapping[str, Any], values: Mapping[str, Any], where: str) -> None:
    for name, value in values.items():
        hint = hints.get(name)
        if hint is None:
            continue
        if _fits(value, hint) is False:
            raise OptionTypeError(f"{where}: option {name}={value!r} ({type(value).__name__}) "
                                  f"does not fit {_describe(hint)}")


def _fits(value: Any, hint: Any) -> bool | object:
    """True / False, or _UNKNOWN for an annotation this module does not check."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        # The type only: which values are allowed is the option's own check (its message).
        return isinstance(value, tuple({type(arg) for arg in typing.get_args(hint)}))
    if origin is Union or origin is types.UnionType:
        results = [_fits(value, arg) for arg in typing.get_args(hint)]
        return True if True in results else (_UNKNOWN if _UNKNOWN in results else False)
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float, np.integer, np.floating)) \
            and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # an options value
        return isinstance(value, hint)
    if origin is collections.abc.Mapping:  # a group given as a dict of its fields
        return isinstance(value, collections.abc.Mapping)
    return _UNKNOWN


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return " or ".join(sorted({type(a).__name__ for a in typing.get_args(hint)}))
    if origin is Union or origin is types.UnionType:
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "None"
    return getattr(hint, "__name__", str(hint))
