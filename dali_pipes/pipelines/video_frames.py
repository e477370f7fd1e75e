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

from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.image import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.pipelines.video import (LENGTH_OUTPUTS, check_size, length_and_mask,
                                        pad_time)

OUTPUTS = ("frames", "timestamps")
VARIABLE_OUTPUTS = OUTPUTS + LENGTH_OUTPUTS


def frame_inputs(clip_length: int) -> tuple[str, ...]:
    return tuple(f"jpeg_{t}" for t in range(clip_length))


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
    decoded = []
    for name in frame_inputs(clip_length):
        jpeg = fn.external_source(name=name, dtype=types.UINT8, ndim=1, no_copy=True)
        image = fn.decoders.image(jpeg, device="cpu" if device == "cpu" else "mixed",
                                  output_type=types.RGB)
        if size is not None:
            image = fn.resize(image, device=device, size=list(size), antialias=True,
                              interp_type=types.INTERP_LINEAR)
        decoded.append(image)
    mirror = fn.external_source(name="mirror", dtype=types.INT32, ndim=0, no_copy=True)
    timestamps = fn.external_source(name="timestamps", dtype=types.FLOAT64, ndim=1,
                                    no_copy=True)
    frames = fn.stack(*decoded, axis=0, axis_name="F")
    if variable:
        length = fn.external_source(name="length", dtype=types.INT32, ndim=0, no_copy=True)
        frames = fn.slice(frames, start=fn.stack(length * 0), shape=fn.stack(length),
                          axes=[0])
    frames = fn.crop_mirror_normalize(
        frames, device=device, mirror=mirror, dtype=types.FLOAT, output_layout="FCHW",
        mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
    if not variable:
        return frames, timestamps
    padded = pad_time(frames), pad_time(timestamps, float64=True)
    return padded + length_and_mask(frames, device)
