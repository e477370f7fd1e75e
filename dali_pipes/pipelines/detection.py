"""The detection graph: window decode, resize, flip + normalize, canvas slice; targets
passed through and padded to the batch's largest box count.

Inputs (`dali_pipes.schema.DETECTION_INPUTS`, per sample, from `dali_pipes.geometry.boxes`):
  "images"  uint8 (n_bytes,)   encoded files
  "anchor", "shape" int32 (2,) the decoded window (top, left), (height, width)
  "resized" float32 (2,)       the window's size after the resize (height, width)
  "offset"  int32 (2,)         (y, x) of the canvas in the flipped resized window
  "mirror"  int32 ()           1 to flip horizontally
  "boxes" float32 (n, 4), "labels" int64 (n,), "box_valid" bool (n,), "iscrowd" bool (n,),
  "num_boxes", "dropped_boxes" int64 (), with masks "masks" uint8 (n, H, W), with
  semantic "semantic" uint8 (H, W)
Outputs (`OUTPUTS`, plus "masks"): "image" float32 (3, H, W) normalized with ImageNet
mean/std, 0 where the canvas holds no image pixels (padding after normalisation, as
torchvision's detection models pad); the targets padded along n with 0 / False (`fn.pad`).
"""
from __future__ import annotations

from typing import Literal

import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import Pipeline

from dali_pipes import schema
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image import _decode_window, new_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.resize import resize

OUTPUTS = schema.DETECTION_SCHEMA.outputs


def graph_inputs(masks: bool, semantic: bool = False) -> tuple[schema.Input, ...]:
    """The graph's inputs (with or without the "masks" and "semantic" inputs)."""
    return schema.DETECTION_INPUTS + ((schema.DETECTION_MASK_INPUT,) if masks else ()) + \
        ((schema.DETECTION_SEMANTIC_INPUT,) if semantic else ())


def outputs(masks: bool, semantic: bool = False) -> tuple[str, ...]:
    """The graph's output names, in order."""
    return OUTPUTS + (("masks",) if masks else ()) + (("semantic",) if semantic else ())


def build_detection_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                             canvas: tuple[int, int], config: PipelineConfig,
                             masks: bool = False, semantic: bool = False,
                             device_id: int | None = None) -> Pipeline:
    """Define (not build) the detection graph for an output canvas (H, W); `masks` and
    `semantic` add those inputs and outputs (passed through, masks padded)."""
    pipe = new_pipeline(device=device, batch_size=batch_size, config=config,
                        device_id=device_id)
    mean, std = schema.pixel_mean_std()
    with pipe:
        (images, anchor, shape, resized, offset, mirror, boxes, labels, valid, crowd,
         num_boxes, dropped, *rest) = external_inputs(graph_inputs(masks, semantic))
        pixels = _decode_window(images, anchor, shape, device, config)
        pixels = resize(pixels, resized, device=device, config=config,
                        interpolation="bilinear")
        pixels = fn.crop_mirror_normalize(pixels, device=device, mirror=mirror,
                                          dtype=types.FLOAT, output_layout="CHW",
                                          mean=list(mean), std=list(std))
        pixels = fn.slice(pixels, offset, list(canvas),
                          device=device, axis_names="HW", normalized_anchor=False,
                          normalized_shape=False, out_of_bounds_policy="pad",
                          fill_values=0.0)
        targets = [fn.pad(t, axes=(0,), fill_value=0) for t in (boxes, labels, valid, crowd)]
        padded = [fn.pad(rest[0], axes=(0,), fill_value=0)] if masks else []
        padded += rest[len(padded):]  # the semantic map: one (H, W) per sample as it is
        pipe.set_outputs(pixels, *targets[:2], num_boxes, *targets[2:], dropped, *padded)
    return pipe
