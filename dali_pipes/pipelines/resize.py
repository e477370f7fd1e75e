"""The image graph's resize: on DALI's CPU backend the fused operator `DpResize`
(`dali_pipes/native/resize_op.cc`: separable bilinear / bicubic, antialiased as PIL's and
torchvision's unless the config's `antialias` is off) where it is available and the config
allows it, else `fn.resize`.
Imports DALI, never torch.
"""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali.data_node import DataNode

from dali_pipes import native
from dali_pipes.pipelines.config import PipelineConfig

INTERP = {"bilinear": types.INTERP_LINEAR, "bicubic": types.INTERP_CUBIC,
          "lanczos": types.INTERP_LANCZOS3, "nearest": types.INTERP_NN}
_FILTER = {"bilinear": 0, "bicubic": 1}  # DpResize's filters


def fused_resize_applies(device: str, config: PipelineConfig, interpolation: str) -> bool:
    """Whether `resize` runs the fused operator for these settings (where it loads)."""
    return (device == "cpu" and interpolation in _FILTER
            and native.wanted("resize_op", None if config.native_ops else False,
                              "resize operator"))


def resize(images, size, *, device: str, config: PipelineConfig, interpolation: str,
           roi=None):
    """`images` (uint8 HWC, or FHWC frames) resized to `size`.

    Args:
        images: uint8 DataNode.
        size: an (H, W) pair or a per-sample float32 (2,) DataNode (a resolution
            schedule's "out_size").
        device, config, interpolation: where, the decode preset (antialias, native_ops)
            and the filter name.
        roi: None, or (roi_start, roi_end) float32 (2,) DataNodes: the (y, x) corners of the
            region to resize in input pixels, sub-pixel edges allowed (fn.resize's
            roi_relative=False).
    """
    if fused_resize_applies(device, config, interpolation):
        sizes = size if isinstance(size, DataNode) else types.Constant(
            np.asarray(size, np.int32), device="cpu")
        # a plugin operator: fn gains it when the library loads, the stub cannot list it
        return fn.dp_resize(images, sizes, *(roi or ()),  # type: ignore[attr-defined]
                            filter=_FILTER[interpolation], antialias=config.antialias)
    region = {} if roi is None else {"roi_start": roi[0], "roi_end": roi[1],
                                     "roi_relative": False}
    return fn.resize(images, device=device, size=size if isinstance(size, DataNode)
                     else list(size), antialias=config.antialias,
                     interp_type=INTERP[interpolation], **region)
