"""The image graph for pixels decoded at a reduced DCT scale in the feed (CPU backend).

Inputs (fed through `external_source`, per batch):
  "pixels"    uint8 (h, w, 3)  the decoded pixels holding the crop window
  "roi_start" float32 (2,)     the window's top, left in those pixels (fractional)
  "roi_end"   float32 (2,)     its bottom, right
  "mirror"    int32 ()         1 to flip horizontally
Output "image": float32 (3, size, size), as the region-of-interest graph in image.py: the
resize reads exactly the crop window (a region of interest with sub-pixel edges), so the
crop is the same window in source pixels whatever the decoding scale.
"""
from __future__ import annotations

import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import Pipeline

from dali_pipes import schema
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image import new_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.resize import resize
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD

INPUTS = schema.names(schema.SCALED_IMAGE_INPUTS)


def build_scaled_image_pipeline(*, batch_size: int, size: int, config: PipelineConfig
                                ) -> Pipeline:
    """Define (not build) the graph over decoded pixels, on DALI's CPU backend.

    Args:
        batch_size: samples per batch.
        size: output side.
        config: the decode preset (threads, prefetch, antialias).

    Returns:
        The pipeline, with the external_source inputs named in INPUTS.
    """
    pipe = new_pipeline(device="cpu", batch_size=batch_size, config=config)
    with pipe:
        pixels, start, end, mirror = external_inputs(schema.SCALED_IMAGE_INPUTS)
        resized = resize(pixels, (size, size), device="cpu", config=config,
                         interpolation="bilinear", roi=(start, end))
        images = fn.crop_mirror_normalize(
            resized, mirror=mirror, dtype=types.FLOAT, output_layout="CHW",
            mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
        pipe.set_outputs(images)
    return pipe
