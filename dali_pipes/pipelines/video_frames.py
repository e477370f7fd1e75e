"""The frame-folder graph: every frame of a batch's clips through ONE image decoder.

Inputs (per batch, one sample per FRAME; the frames of clip 0 first, then clip 1, ...):
  "jpegs"      uint8 (n_bytes,)  one encoded frame
  "mirror"     int32 ()          1 flips the frame (its clip's flag, repeated per frame)
  "timestamps" float64 ()        the frame's time, passed through
  "clip"       int32 ()          the position of the frame's clip in the batch
  with `crop=True` (resize="short_side"): "crop_start" / "crop_end" float32 (2,), the
  clip's crop window in source pixels (y, x), repeated per frame: the resize reads that
  window (the resize's region of interest) and writes `size`
Outputs, per frame: "frames" float32 (3, H, W) normalized with ImageNet mean/std (CHW),
"timestamps" float64 (), "clip" int32 (). `regroup` turns them into the clip batch
("frames" (B, T, 3, H, W), "timestamps" (B, T)); with variable-length clips it pads every
clip to the batch's longest with zeros and adds "length" int64 (B,) and "mask" bool (B, T).

Design: a batch of B clips of T frames is B x T decoder samples, so one decoder
(`fn.decoders.image`, "mixed" = nvJPEG / the hardware JPEG decoder on the GPU, "cpu"
otherwise) with one thread pool and one set of buffers serves the whole batch, instead of
one decoder per frame position (T decoders, each with its own threads and padding). The
pipeline's batch size is B x T (`frames_per_batch`); a batch with skipped clips or shorter
clips (pad="variable": only the frames a clip has are fed) simply has fewer samples. The
preset's decoder knobs are passed like the image graph's (hardware decoder load, memory
padding, preallocation hints, fancy upsampling, antialias). Not `use_fast_idct`: the CPU
decoder keeps libjpeg-turbo's exact IDCT, so at native size the frames equal torchvision's
decode on the torch backend (tests/torch_bridge/test_video_frames.py).
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types

from dali_pipes import schema
from dali_pipes.pipelines.config import PipelineConfig, affine_threads, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.resize import resize
from dali_pipes.pipelines.video import LENGTH_OUTPUTS, check_size, crop_inputs
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD

INPUTS = schema.names(schema.FRAME_INPUTS)
OUTPUTS = schema.FRAME_OUTPUTS  # per frame; `regroup` makes the clip batch
VARIABLE_OUTPUTS = OUTPUTS  # the same graph: padding and LENGTH_OUTPUTS come from regroup
BATCH_FIELDS = schema.VIDEO_SCHEMA.outputs  # after regroup (+ LENGTH_OUTPUTS when variable)


def frames_per_batch(batch_size: int, clip_length: int) -> int:
    return batch_size * clip_length


def build_frames_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                          config: PipelineConfig, size: tuple[int, int] | None,
                          clip_length: int, device_id: int | None = None,
                          variable: bool = False, crop: bool = False):
    """Define (not build) the graph for batches of `batch_size` clips of up to
    `clip_length` frames; `size` (H, W) or None for native resolution. `variable` is
    accepted for symmetry with the video graph (padding happens in `regroup`); `crop`:
    each frame is resized from its "crop_start" / "crop_end" window to `size`."""
    check_size(size, crop)
    return define_pipeline(frames_graph, device=device,
                           batch_size=frames_per_batch(batch_size, clip_length),
                           config=config, device_id=device_id, size=size, knobs=config,
                           crop=bool(crop))


def _decode(jpegs, device: str, knobs: PipelineConfig):
    knob = knobs.gpu_decode
    common = dict(output_type=types.RGB, jpeg_fancy_upsampling=knob.jpeg_fancy_upsampling)
    if device == "cpu":
        return fn.decoders.image(jpegs, device="cpu", **common)  # exact IDCT, see below
    return fn.decoders.image(
        jpegs, device="mixed", hw_decoder_load=knob.hw_decoder_load,
        device_memory_padding=knob.device_memory_padding,
        host_memory_padding=knob.host_memory_padding,
        preallocate_width_hint=knob.preallocate_width_hint,
        preallocate_height_hint=knob.preallocate_height_hint, affine=affine_threads(),
        **common)


def frames_graph(device: str, size, knobs: PipelineConfig, crop: bool = False):
    jpegs, mirror, timestamps, clip = external_inputs(schema.FRAME_INPUTS)
    roi = crop_inputs(crop)
    image = _decode(jpegs, device, knobs)
    if size is not None:
        image = resize(image, size, device=device, config=knobs, interpolation="bilinear",
                       roi=roi)
    frames = fn.crop_mirror_normalize(
        image, device=device, mirror=mirror, dtype=types.FLOAT,
        output_layout="CHW", mean=[m * 255 for m in IMAGENET_MEAN],
        std=[s * 255 for s in IMAGENET_STD])
    return frames, timestamps, clip


def clip_lengths(clip: np.ndarray, n_clips: int) -> np.ndarray:
    """Frames per clip (int64 (n_clips,)) from the per-frame clip positions, which must
    be grouped (all of clip 0, then clip 1, ...) and name every clip."""
    clip = np.asarray(clip, np.int64)
    if clip.size and (np.any(np.diff(clip) < 0) or clip.min() < 0 or clip.max() >= n_clips):
        raise ValueError(f"frame clip positions must be grouped and in [0, {n_clips}), got "
                         f"{clip.tolist()[:16]}")
    lengths = np.bincount(clip, minlength=n_clips)
    if np.any(lengths == 0):
        raise ValueError(f"clips {np.flatnonzero(lengths == 0).tolist()} have no frames")
    return lengths


def padding_mask(lengths: np.ndarray) -> np.ndarray:
    """bool (B, max length): True at each clip's first `length` positions."""
    return np.arange(int(lengths.max())) < np.asarray(lengths)[:, None]


__all__ = ["INPUTS", "OUTPUTS", "VARIABLE_OUTPUTS", "BATCH_FIELDS", "LENGTH_OUTPUTS",
           "build_frames_pipeline", "frames_per_batch", "clip_lengths", "padding_mask"]
