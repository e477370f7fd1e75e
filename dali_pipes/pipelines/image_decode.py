"""The image graph's decode: the crop window of each file, with the EXIF orientation and
the alpha channel when `dali_pipes.formats.image_decode.ImageDecode` asks for them.

`decoders.image_slice` with `adjust_orientation=True` turns the image first: its anchor
and shape then refer to the displayed image, which is what the plan's window is drawn on.
With alpha, the feed sends each sample's alpha window (uint8 (h, w, 1), input "alpha")
and the graph appends it to the decoded RGB window as a fourth channel.
"""
from __future__ import annotations

import nvidia.dali.fn as fn
import nvidia.dali.types as types

from dali_pipes import schema
from dali_pipes.formats.image_decode import ImageDecode
from dali_pipes.pipelines.config import PipelineConfig, affine_threads


def decode_inputs(decode: ImageDecode | None) -> tuple[schema.Input, ...]:
    """The graph inputs the decode options add (after the recipe's)."""
    return (schema.ALPHA_INPUT,) if decode is not None and decode.alpha else ()


def decode_window(jpegs, anchor, shape, device: str, config: PipelineConfig,
                  decode: ImageDecode | None = None, alpha=None):
    """Decoded crop windows, HWC uint8: RGB, or RGB + the fed alpha with `decode.alpha`."""
    decode = decode or ImageDecode()
    gpu = config.gpu_decode
    common = dict(axis_names="HW", normalized_anchor=False, normalized_shape=False,
                  output_type=types.RGB, adjust_orientation=decode.orientation,
                  jpeg_fancy_upsampling=gpu.jpeg_fancy_upsampling)
    if device == "cpu":
        images = fn.decoders.image_slice(jpegs, anchor, shape, device="cpu",
                                         use_fast_idct=config.use_fast_idct, **common)
    else:
        images = fn.decoders.image_slice(
            jpegs, anchor, shape, device="mixed", hw_decoder_load=gpu.hw_decoder_load,
            affine=affine_threads(),
            device_memory_padding=gpu.device_memory_padding,
            host_memory_padding=gpu.host_memory_padding,
            preallocate_width_hint=gpu.preallocate_width_hint,
            preallocate_height_hint=gpu.preallocate_height_hint, **common)
    if not decode.alpha:
        return images
    if alpha is None:
        raise ValueError("decode.alpha needs the graph input 'alpha'")
    return fn.cat(images, alpha.gpu() if device != "cpu" else alpha, axis=2)
