"""The image graph's decode and resize on DALI's CPU backend through the native operator
`DpDecodeCropResize` (`dali_pipes/native/decode_crop_op.cc`): each JPEG's crop window
decoded with libjpeg-turbo's partial decoding (only the window's iMCU rows and columns,
decoding stopped after its last row) and resized in the same task. The window's pixels are
the full decode's (one pixel of margin keeps fancy upsampling's neighbours), so the output
equals DALI's `decoders.image_slice` followed by the resize (docs/native_ops.md).

Files the operator does not decode (PNG and other formats, CMYK / YCCK JPEGs, 12-bit
JPEGs, headers libjpeg cannot read) are routed per sample to DALI's decoder and the resize
(`fn._conditional.split` / `merge`, as the policy graph does), so they decode as before and
their errors are DALI's.
Imports DALI, never torch.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali.data_node import DataNode

from dali_pipes import native
from dali_pipes.formats.image_decode import ImageDecode
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image_decode import decode_window
from dali_pipes.pipelines.resize import resize

_FILTER = {"bilinear": 0, "bicubic": 1}


def partial_decode_applies(device: str, config: PipelineConfig, interpolation: str,
                           decode: ImageDecode | None) -> bool:
    """Whether the graph decodes through DpDecodeCropResize: the CPU backend, the preset's
    `jpeg_partial_decode` and `native_ops`, bilinear or bicubic, no EXIF orientation or
    alpha, and the operator loads."""
    return (device == "cpu" and config.jpeg_partial_decode and config.native_ops
            and interpolation in _FILTER and (decode is None or decode.is_default)
            and native.wanted("decode_crop_op", None, "JPEG crop decoder"))


def _split(node, pred):
    # DALI's shipped fn stub omits the private _conditional module it has at run time
    return fn._conditional.split(node, predicate=pred)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Finish:
    """The flip, layout and normalisation DpDecodeCropResize applies while writing its
    output (the default recipe's crop_mirror_normalize, fused): `mirror` is the per-sample
    int32 DataNode, `mean` / `std` on the 0..255 scale (None: uint8 output)."""
    mirror: Any
    layout: str = "CHW"
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def operator_args(self) -> dict:
        norm = {} if self.mean is None else {"mean": list(self.mean), "std": list(self.std or ())}
        return {"output_layout": self.layout, **norm}

    def apply(self, images, device: str = "cpu", dtype=types.FLOAT):
        """The same finish by DALI's crop_mirror_normalize (`dtype`: a normalised output's
        type; DpDecodeCropResize writes float32)."""
        if self.mean is None:
            return fn.crop_mirror_normalize(images, device=device, mirror=self.mirror,
                                            dtype=types.UINT8, output_layout=self.layout)
        return fn.crop_mirror_normalize(images, device=device, mirror=self.mirror,
                                        dtype=dtype, output_layout=self.layout,
                                        mean=list(self.mean), std=list(self.std or ()))


def decode_crop_resize(jpegs, anchor, shape, size, *, config: PipelineConfig,
                       interpolation: str, max_dct_factor: int = 1,
                       finish: Finish | None = None):
    """The crop windows resized to `size` (an (H, W) pair or a per-sample (2,) DataNode):
    JPEGs through DpDecodeCropResize, other files through DALI's decoder. uint8 HWC, or
    with `finish` flipped, laid out and normalised as it says.

    Args:
        jpegs, anchor, shape: the encoded files and their windows (top, left), (h, w).
        size: the output (H, W), or a float32 (2,) DataNode (a resolution schedule).
        config: the preset (antialias, use_fast_idct, native_ops for the fallback resize).
        interpolation: "bilinear" or "bicubic".
        max_dct_factor: 1 decodes at full scale; 2, 4 or 8 allow libjpeg's DCT scaling
            for windows at least that many times the output.
        finish: the flip and normalisation to fuse into the decoder's output pass.
    """
    if not isinstance(size, DataNode):  # per sample, so it splits with the batch
        size = anchor * 0 + types.Constant(np.asarray(size, np.int32), device="cpu")
    ok = fn.dp_jpeg_decodable(jpegs)  # type: ignore[attr-defined]
    (j_in, j_out), (a_in, a_out) = _split(jpegs, ok), _split(anchor, ok)
    (s_in, s_out), (z_in, z_out) = _split(shape, ok), _split(size, ok)
    fused: dict = {}
    if finish is not None:
        m_in, m_out = _split(finish.mirror, ok)
        fused = {"mirror": m_in, **finish.operator_args()}
    fast = fn.dp_decode_crop_resize(  # type: ignore[attr-defined]
        j_in, a_in, s_in, z_in, filter=_FILTER[interpolation], antialias=config.antialias,
        fast_idct=config.use_fast_idct, max_dct_factor=max_dct_factor, **fused)
    slow = resize(decode_window(j_out, a_out, s_out, "cpu", config), z_out, device="cpu",
                  config=config, interpolation=interpolation)
    if finish is not None:
        slow = replace(finish, mirror=m_out).apply(slow)
    return fn._conditional.merge(fast, slow, predicate=ok)  # type: ignore[attr-defined]
