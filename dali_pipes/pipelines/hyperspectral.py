"""The hyperspectral graph: cast, optional per-band normalisation, flips and 90-degree turns.

Inputs (fed by the loader through `external_source`, one dense array per batch):
  "cube"   (n_bands, P, P) CHW patch in the scenes' common dtype, read from memmaps
  "mean"   float32 (n_bands, 1, 1) per-band mean of the sample's scene  (normalize only)
  "std"    float32 (n_bands, 1, 1) per-band std of the sample's scene   (normalize only)
  "flip_h" int32 ()  1 to flip the W axis                                (augment only)
  "flip_v" int32 ()  1 to flip the H axis                                (augment only)
  "k"      int32 ()  quarter turns, 0..3                                 (augment only)
Output "cube": float32 (n_bands, P, P), layout CHW, equal to
``np.rot90(flip((x.astype(float32) - mean) / std), k, axes=(1, 2))``.

Every element of the dihedral group is "transpose or not, then flip H and/or W", so the turn
is exact: the graph transposes the samples that need it (a DALI conditional, so the graph is
defined through ``pipeline_def(enable_conditionals=True)``) and then flips with per-sample
arguments. No interpolation is involved; results equal numpy's bit for bit (timings in
docs/measurements.md).
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import Pipeline

from dali_pipes import schema
from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs

AUGMENT_INPUTS = schema.names(schema.AUGMENT_INPUTS)
NORMALIZE_INPUTS = schema.names(schema.NORMALIZE_INPUTS)
OUTPUTS = schema.HYPERSPECTRAL_SCHEMA.outputs


def inputs(*, augment: bool, normalize: bool) -> tuple[str, ...]:
    """Names of the graph's inputs for these options."""
    return schema.names(_declared(augment=augment, normalize=normalize))


def _declared(*, augment: bool, normalize: bool) -> tuple[schema.Input, ...]:
    return (schema.HYPERSPECTRAL_INPUTS + schema.NORMALIZE_INPUTS * bool(normalize)
            + schema.AUGMENT_INPUTS * bool(augment))


def build_hyperspectral_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                                 config: PipelineConfig, dtype=np.float32,
                                 augment: bool = True, normalize: bool = False,
                                 device_id: int | None = None) -> Pipeline:
    """Define (not build) the graph; ``dtype`` is the numpy dtype of the fed patches."""
    return define_pipeline(_graph, device=device, batch_size=batch_size, config=config,
                           device_id=device_id, dtype=np.dtype(dtype).name,
                           augment=augment, normalize=normalize)


def _graph(device: str, dtype: str, augment: bool, normalize: bool):
    backend = device
    created = external_inputs(_declared(augment=augment, normalize=normalize),
                              dtypes={"cube": dtype})
    # no zip(strict=...) here: DALI's autograph (conditionals) replaces zip without it
    nodes = {name: created[i] for i, name in enumerate(inputs(augment=augment,
                                                              normalize=normalize))}
    cube = _on(nodes["cube"], backend)
    if dtype != "float32":
        cube = fn.cast(cube, dtype=types.FLOAT, device=backend)
    if normalize:
        cube = (cube - _on(nodes["mean"], backend)) / _on(nodes["std"], backend)
    if augment:
        flip_h, flip_v, k = (nodes[name] for name in AUGMENT_INPUTS)
        cube = dihedral(cube, flip_h, flip_v, k, backend=backend)
    return cube


def _on(node, backend: str):
    return node.gpu() if backend == "gpu" else node


def dihedral(cube, flip_h, flip_v, k, *, backend: str):
    """``np.rot90(flip(cube), k, axes=(1, 2))`` as "transpose or not, then flips".

    A quarter turn is "transpose, then flip H"; three are "transpose, then flip W"; a
    transpose turns an earlier W flip into an H flip and back. Per sample, with
    odd = k & 1 and half = k // 2 (flips commute, and flipping twice undoes):
        k  transpose  flip W          flip H
        0  no         flip_h          flip_v
        1  yes        flip_v          flip_h ^ 1
        2  no         flip_h ^ 1      flip_v ^ 1
        3  yes        flip_v ^ 1      flip_h
    Only the samples that need it are transposed (a DALI conditional: ``fn.transpose``
    takes no per-sample permutation).
    """
    odd, half = k & 1, k // 2
    first = flip_h + odd * (flip_v - flip_h)  # flip_v when transposed, else flip_h
    second = flip_v + odd * (flip_h - flip_v)
    if fn.cast(odd, dtype=types.BOOL):
        cube = fn.transpose(cube, perm=[0, 2, 1], transpose_layout=False, device=backend)
    return fn.flip(cube, horizontal=first ^ half, vertical=second ^ (odd ^ half),
                   device=backend)


__all__ = ["AUGMENT_INPUTS", "NORMALIZE_INPUTS", "OUTPUTS", "build_hyperspectral_pipeline",
           "dihedral", "inputs"]
