"""The arrays graph: cast, optional per-channel normalisation, zero padding to the window.

Input (fed by the loader through `external_source`, one array per sample):
  "series"  (n, C) the window's real rows (1 <= n <= length) in the files' dtype
Output "series": float32 (length, C), layout TC, equal to
``np.pad((x.astype(float32) - mean) / std, ((0, length - n), (0, 0)))``: the padding rows
are 0 whatever the normalisation (mean and std are constants of the graph, broadcast over
the rows).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import Pipeline

from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.sources.arrays import ARRAYS_INPUTS, ARRAYS_SCHEMA

OUTPUTS = ARRAYS_SCHEMA.outputs


def build_arrays_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                          config: PipelineConfig, length: int, dtype=np.float32,
                          mean: Sequence[float] | None = None,
                          std: Sequence[float] | None = None,
                          device_id: int | None = None) -> Pipeline:
    """Define (not build) the graph; `dtype` is the numpy dtype of the fed windows, `mean`
    and `std` per-channel float sequences (both or neither)."""
    return define_pipeline(_graph, device=device, batch_size=batch_size, config=config,
                           device_id=device_id, dtype=np.dtype(dtype).name, length=int(length),
                           mean=None if mean is None else tuple(map(float, mean)),
                           std=None if std is None else tuple(map(float, std)))


def _graph(device: str, dtype: str, length: int, mean, std):
    (series,) = external_inputs(ARRAYS_INPUTS, dtypes={"series": dtype})
    if device == "gpu":
        series = series.gpu()
    series = fn.cast(series, dtype=types.FLOAT, device=device)
    if mean is not None and std is not None:
        series = ((series - _row(mean, device)) / _row(std, device))
    return fn.pad(series, axes=(0,), shape=(length,), fill_value=0.0, device=device)


def _row(values: tuple[float, ...], device: str):
    """A (1, C) float32 constant of the graph."""
    return types.Constant(np.asarray(values, np.float32)[None, :], device=device)


__all__ = ["OUTPUTS", "build_arrays_pipeline"]
