"""`make_loader(..., fields=(...))`: batches as tuples of chosen fields, in order.

A training loop written for torchvision's `ImageFolder` and `DataLoader` unpacks each batch
(`for images, target in loader`); with `fields=("image", "label")` the Loader yields
`(batch["image"], batch["label"])` instead of the dict, the same tensors on both backends.
The names are checked when the loader is made (a sequence of distinct strings) and against
each batch's fields (a name the batch does not hold is a ValueError listing those it does).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def check_fields(fields: Sequence[str] | None) -> tuple[str, ...] | None:
    """The field names as a tuple (None: dict batches).

    Args:
        fields: None, or a non-empty sequence of distinct field names.

    Returns:
        The names, in order; TypeError / ValueError naming the option otherwise.
    """
    if fields is None:
        return None
    if isinstance(fields, (str, bytes)) or not isinstance(fields, Sequence):
        raise TypeError(f"fields must be a sequence of batch field names, e.g. "
                        f"('image', 'label'), got {fields!r}")
    names = tuple(fields)
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise TypeError(f"fields={names!r}: every field name must be a str, got {wrong[0]!r}")
    if not names:
        raise ValueError("fields=(): name at least one batch field, e.g. ('image', 'label')")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"fields={names!r}: {', '.join(map(repr, repeated))} named more "
                         f"than once")
    return names


def pick(batch: dict[str, torch.Tensor], fields: tuple[str, ...], modality: str
         ) -> tuple[Any, ...]:
    """The batch's values of `fields`, in order.

    Args:
        batch: one batch dict, as the loader would yield it.
        fields: checked names (`check_fields`).
        modality: the loader's modality, named in the error.

    Returns:
        A tuple of the batch's tensors; ValueError listing the batch's fields for a name
        it does not hold.
    """
    try:
        return tuple(batch[name] for name in fields)
    except KeyError as exc:
        raise ValueError(
            f"fields={fields!r}: {exc.args[0]!r} is not a field of this {modality!r} "
            f"loader's batches; they hold {', '.join(map(repr, batch))} (see "
            f"docs/schema.md; options such as mixup= or masks=True add fields)") from None
