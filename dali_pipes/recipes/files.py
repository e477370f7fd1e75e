"""Recipe presets: named TOML files in dali_pipes/recipes/presets/, or a user's own TOML.

A recipe file holds image options (docs/recipes.md, every key commented in the
shipped presets) as flat keys (`mixup = 0.2`) or as tables named after their group
(`[mixing]` with `mixup = 0.2`), an optional `description`, and an optional `[eval]` table
of keys used instead when `train=False`. Training-only keys (augmentation, erasing, mixing)
do not apply to an evaluation loader. Unknown keys raise ValueError listing the known ones;
values are validated like make_loader's options, naming the file.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python < 3.11
    import tomli as tomllib

from dali_pipes.option_groups import expand, leaves
from dali_pipes.recipes import (
    RECIPE_OPTIONS,
    Erasing,
    ImageRecipe,
    Mixing,
    Photometric,
    Policy,
    image_recipe,
)

RECIPE_DIR = Path(__file__).parent / "presets"
# the training augmentation: the crop window's draw and flips, and every later stage
TRAIN_ONLY = frozenset({"scale", "ratio", "hflip", "vflip"}.union(
    *(leaves(group) for group in (Photometric, Policy, Erasing, Mixing))))
KNOWN_KEYS = frozenset(RECIPE_OPTIONS - {"train"})


def available_recipes() -> list[str]:
    """The names of the shipped recipe presets."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.toml"))


def _path(recipe: str | os.PathLike) -> Path:
    path = Path(recipe)
    if path.suffix == ".toml" or path.exists():
        if not path.exists():
            raise ValueError(f"image option recipe={str(recipe)!r}: no such file")
        return path
    path = RECIPE_DIR / f"{recipe}.toml"
    if not path.exists():
        raise ValueError(f"image option recipe={str(recipe)!r} is unknown: expected one of "
                         f"{', '.join(available_recipes())}, or a path to a .toml file")
    return path


def _flat_keys(table: dict, where: str) -> dict:
    """The table with group tables (`[mixing]`) as flat keys; ValueError for unknown keys
    or a flat key that disagrees with its group table."""
    table = expand(table, (ImageRecipe,), where=where)
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known keys: "
                         f"{', '.join(sorted(KNOWN_KEYS))}")
    return table


def _value(key: str, value, where) -> Any:
    """TOML arrays as tuples; a `size` table's string keys as int epochs."""
    if isinstance(value, list):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    if key == "size" and isinstance(value, dict):
        if not all(k.isdigit() for k in value):
            raise ValueError(f"{where}: size table keys must be epochs (0, 1, ...), got "
                             f"{sorted(value)}")
        return {int(k): tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    return value


def load_recipe(recipe: str | os.PathLike, *, train: bool) -> dict[str, Any]:
    """The image options a recipe sets for a train or an eval loader.

    Args:
        recipe: a preset name (`available_recipes()`) or a path to a TOML file.
        train: whether the loader trains (an eval loader takes `[eval]` and drops the
            training-only keys).

    Returns:
        option name -> value (TOML arrays as tuples), validated.
    """
    path = _path(recipe)
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    table.pop("description", None)
    evals = _flat_keys(table.pop("eval", {}), f"{path} [eval]")
    table = _flat_keys(table, str(path))
    if not train:
        table = {k: v for k, v in table.items() if k not in TRAIN_ONLY} | evals
    options = {k: _value(k, v, path) for k, v in table.items()}
    try:
        image_recipe(train=train, **options)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return options
