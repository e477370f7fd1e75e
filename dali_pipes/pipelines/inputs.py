"""`external_source` nodes built from the schema's `Input` declarations, and the check that
a modality's feeds fill exactly the inputs a graph declared.

Every graph module builds its inputs with `external_inputs` while the graph is defined; the
names are recorded on the pipeline being defined (`graph_inputs(pipe)`), so the loader can
compare them with the keys of the first batch it feeds (`check_feeds`) instead of failing
later inside DALI with "no input named ...". Imports DALI, never torch.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from numpy.typing import DTypeLike
from nvidia.dali import Pipeline

from dali_pipes.schema import Input

_RECORD = "_declared_inputs"


def external_inputs(declared: Iterable[Input], *, dtypes: Mapping[str, DTypeLike] | None = None
                    ) -> list:
    """One `fn.external_source` per declaration, in order (call inside a graph definition).

    Args:
        declared: the graph's inputs (see `dali_pipes.schema`).
        dtypes: numpy dtypes for inputs declared with `dtype=None`, by name.

    Returns:
        The DataNodes, in the order of `declared`.
    """
    nodes = []
    pipe = Pipeline.current()
    for spec in declared:
        dtype = spec.dtype if spec.dtype is not None else (dtypes or {}).get(spec.name)
        if dtype is None:
            raise ValueError(f"graph input {spec.name!r} has no dtype: pass dtypes=")
        nodes.append(fn.external_source(name=spec.name, dtype=types.to_dali_type(
            np.dtype(dtype)), ndim=spec.ndim, layout=spec.layout, no_copy=True))
        if pipe is not None:
            setattr(pipe, _RECORD, getattr(pipe, _RECORD, ()) + (spec.name,))
    return nodes


def graph_inputs(pipe) -> tuple[str, ...] | None:
    """The input names a pipeline's graph declared through `external_inputs`, in order;
    None for a pipeline defined otherwise."""
    return getattr(pipe, _RECORD, None)


def check_feeds(pipe, feeds: Mapping[str, object], who: str) -> None:
    """ValueError unless `feeds` has exactly the graph's declared inputs.

    Args:
        pipe: a pipeline defined with `external_inputs` (others are not checked).
        feeds: one batch's inputs, name -> arrays.
        who: what produced the feeds, for the message (e.g. the modality's class).
    """
    declared = graph_inputs(pipe)
    if declared is None or set(feeds) == set(declared):
        return
    missing = [name for name in declared if name not in feeds]
    extra = sorted(set(feeds) - set(declared))
    raise ValueError(f"{who}.feeds() does not match its graph's inputs {list(declared)}: "
                     f"missing {missing}, not in the graph {extra}")
