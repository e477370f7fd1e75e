"""Option groups: small frozen dataclasses, some holding others, and the flat keywords
(shorthands) that set their fields one by one (pure Python).

A field made with `group(Cls)` holds a nested group. Its keyword, the field's name, takes
a `Cls` (which sets every field of the group: a preset fills none of them) or a mapping of
some of its fields (which sets only those, like the flat keywords). Every other field is an
option whose flat keyword is the field's name, or the `flat` name in its metadata
(`shorthand(...)`: `Erasing.scale` is `erasing_scale`). A flat keyword may share the name of
a group keyword (`erasing=0.25` sets `Erasing.p`, `erasing=Erasing(...)` the group): the
value tells them apart. A field with `metadata={"option": False}` is derived, not an option.

`expand` turns group keywords into flat ones and refuses a flat keyword that disagrees with
the group given beside it; `build` makes a group from flat keywords.
"""
from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any


def group(cls: type) -> Any:
    """A dataclass field holding the nested option group `cls` (default: its defaults)."""
    return dataclasses.field(default_factory=cls, metadata={"group": cls})


def shorthand(name: str, default: Any) -> Any:
    """A dataclass field whose flat keyword is `name` rather than the field's own name."""
    return dataclasses.field(default=default, metadata={"flat": name})


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One option: its flat keyword, the field names leading to it, its field and the
    dataclass declaring that field."""

    flat: str
    path: tuple[str, ...]
    field: dataclasses.Field
    owner: type

    @property
    def default(self) -> Any:
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default


def leaves(cls: type) -> dict[str, Leaf]:
    """Every option of `cls`, nested groups included, by flat keyword, in declaration order."""
    out: dict[str, Leaf] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata.get("option", True):
            continue
        sub = f.metadata.get("group")
        if sub is None:
            name = f.metadata.get("flat", f.name)
            out[name] = Leaf(name, (f.name,), f, cls)
            continue
        for name, leaf in leaves(sub).items():
            out[name] = dataclasses.replace(leaf, path=(f.name, *leaf.path))
    return out


def nested(cls: type) -> dict[str, type]:
    """The groups nested in `cls`, by keyword (the field's name)."""
    return {f.name: f.metadata["group"] for f in dataclasses.fields(cls)
            if "group" in f.metadata}


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely meant: the same letters without underscores
    (`batchsize` -> `batch_size`), else the closest spelling; None when none is close."""
    def squash(text: str) -> str:
        return text.replace("_", "").replace("-", "").lower()

    pool = sorted(set(candidates))
    same = [c for c in pool if squash(c) == squash(name)]
    if same:
        return same[0]
    near = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
    return near[0] if near else None


def group_values(cls: type, value: Any, *, where: str) -> dict[str, Any]:
    """The flat keywords a group value sets: every option of a `cls`, or the fields a
    mapping names (by field name or flat keyword); ValueError naming an unknown key."""
    options = leaves(cls)
    if isinstance(value, cls):
        return {name: _get(value, leaf.path) for name, leaf in options.items()}
    by_field = {leaf.path[-1]: name for name, leaf in options.items()}
    out = {}
    for key, item in value.items():
        name = by_field.get(key, key if key in options else None)
        if name is None:
            guess = closest(key, [*by_field, *options])
            hint = f"did you mean {guess}?" if guess else f"expected {', '.join(by_field)}"
            raise ValueError(f"{where}: {cls.__name__} has no field {key!r}; {hint}")
        out[name] = item
    return out


def is_group_value(cls: type, value: Any) -> bool:
    """Whether `value` is given as the group itself (an instance or a mapping of fields)."""
    return isinstance(value, (cls, Mapping))


def merge(keyword: str, cls: type, value: Any, given: Mapping[str, Any], *, where: str
          ) -> dict[str, Any]:
    """The flat keywords the group value `value` (given as `keyword`) sets, checked against
    the flat keywords in `given`: ValueError when one of them disagrees with the group."""
    out = group_values(cls, value, where=f"{where}: {keyword}")
    for name, item in out.items():
        if name in given and not same(given[name], item):
            field = leaves(cls)[name].path[-1]
            raise ValueError(f"{where}: {name}={given[name]!r} and {keyword}={value!r} "
                             f"disagree ({keyword}.{field} is {item!r}); give one of them")
    return out


def expand(given: Mapping[str, Any], groups: Iterable[type], *, where: str
           ) -> dict[str, Any]:
    """`given` with each nested-group keyword of `groups` replaced by the flat keywords it
    sets (see `merge`); flat keywords and unknown names pass through unchanged."""
    keywords = {name: sub for cls in groups for name, sub in nested(cls).items()}
    grouped = {name for name, value in given.items()
               if name in keywords and is_group_value(keywords[name], value)}
    out = {name: value for name, value in given.items() if name not in grouped}
    for name in grouped:
        out.update(merge(name, keywords[name], given[name], out, where=where))
    return out


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """A `cls` whose options are set from the flat keywords `values` (the rest keep their
    defaults); ValueError naming a keyword `cls` has no option for."""
    unknown = [name for name in values if name not in leaves(cls)]
    if unknown:
        raise ValueError(f"{cls.__name__} has no option {', '.join(unknown)}")
    return _build(cls, values)


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if "group" in f.metadata:
            kwargs[f.name] = _build(f.metadata["group"], values)
        elif f.metadata.get("option", True) and f.metadata.get("flat", f.name) in values:
            kwargs[f.name] = values[f.metadata.get("flat", f.name)]
    return cls(**kwargs)


def same(a: Any, b: Any) -> bool:
    """Whether two option values are equal (lists and tuples alike)."""
    a, b = _plain(a), _plain(b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays: equal only as the same object
        return a is b


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        value = getattr(value, name)
    return value
