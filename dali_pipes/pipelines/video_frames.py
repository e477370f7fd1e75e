"""The frame-folder graph: T JPEG inputs per sample -> one normalized clip per sample.

Inputs (per batch, one sample per clip):
  "jpeg_0" .. "jpeg_{T-1}" uint8 (n_bytes,)  the encoded frames of the clip, in clip order
  "mirror"                 int32 ()          1 flips every frame of the clip
  "timestamps"             float64 (T,)      passed through unchanged
Outputs: "frames" float32 (T, 3, H, W) normalized with ImageNet mean/std (FCHW),
"timestamps" float64 (T,).

Design: instead of flattening a batch of B clips into B*T images (which would break the
engine's one-sample-per-index feeding and per-sample error blame), frame t of every clip is
its own input; each is decoded (`fn.decoders.image`, "mixed" = nvJPEG on the GPU, "cpu"
otherwise) and resized, then `fn.stack(axis=0, axis_name="F")` builds the (T, H, W, 3) FHWC
sequence, so the flip of `crop_mirror_normalize` is the same for every frame of a clip and
the output needs no reshaping. T (the clip length) is fixed when the graph is defined.

Variable-length clips (`variable=True`): a clip of L < T frames still fills all T inputs (the
source repeats its last frame's bytes) and one more input, "length" int32 (), says how many
are real; the stacked sequence is cut to its first L frames (`fn.slice` on axis F) before
normalization, then every time field is padded to the batch's longest clip with zeros and
"length" / "mask" are added, exactly as in the video graph (`video.pad_time`,
`video.length_and_mask`).
"""
from __future__ import annotations

from typing import Literal

import nvidia.dali.fn as fn
import nvidia.dali.types as types

from dali_pipes import schema
from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.video import (LENGTH_OUTPUTS, check_size, length_and_mask,
                                        pad_time)
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD

OUTPUTS = schema.GRAPH_OUTPUTS["video"]
VARIABLE_OUTPUTS = OUTPUTS + LENGTH_OUTPUTS


def inputs(clip_length: int, *, variable: bool = False) -> tuple[schema.Input, ...]:
    """The graph's input declarations: T JPEGs, "mirror", "timestamps" (+ "length")."""
    return (schema.frame_inputs(clip_length) + schema.CLIP_INPUTS
            + (schema.LENGTH_INPUT,) * bool(variable))


def frame_inputs(clip_length: int) -> tuple[str, ...]:
    """Names of the T encoded-frame inputs, "jpeg_0" .. "jpeg_{T-1}"."""
    return schema.names(schema.frame_inputs(clip_length))


def build_frames_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                          config: PipelineConfig, size: tuple[int, int] | None,
                          clip_length: int, device_id: int | None = None,
                          variable: bool = False):
    """Define (not build) the graph; `size` (H, W) or None for native resolution;
    `variable`: clips of their own lengths, padded per batch (VARIABLE_OUTPUTS)."""
    check_size(size)
    return define_pipeline(frames_graph, device=device, batch_size=batch_size, config=config,
                           device_id=device_id, size=size, clip_length=clip_length,
                           variable=bool(variable))


def frames_graph(device: str, size, clip_length: int, variable: bool = False):
    *jpegs, mirror, timestamps = external_inputs(inputs(clip_length))
    decoded = []
    for jpeg in jpegs:
        image = fn.decoders.image(jpeg, device="cpu" if device == "cpu" else "mixed",
                                  output_type=types.RGB)
        if size is not None:
            image = fn.resize(image, device=device, size=list(size), antialias=True,
                              interp_type=types.INTERP_LINEAR)
        decoded.append(image)
    frames = fn.stack(*decoded, axis=0, axis_name="F")
    if variable:
        (length,) = external_inputs((schema.LENGTH_INPUT,))
        frames = fn.slice(frames, start=fn.stack(length * 0), shape=fn.stack(length),
                          axes=[0])
    frames = fn.crop_mirror_normalize(
        frames, device=device, mirror=mirror, dtype=types.FLOAT, output_layout="FCHW",
        mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
    if not variable:
        return frames, timestamps
    padded = pad_time(frames), pad_time(timestamps, float64=True)
    return padded + length_and_mask(frames, device)
