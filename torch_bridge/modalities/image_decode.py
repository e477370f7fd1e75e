"""Decoding any image format the image source accepts to uint8 RGB (the torch path).

torchvision's `decode_image` reads JPEG, PNG and WebP (GIFs arrive as PNG, see
`dali_pipes.formats.image_kind.prepare_image`); BMP and TIFF go through PIL. 16-bit PNGs
come out as uint8 by their high byte, as DALI's decoder gives them.
"""
from __future__ import annotations

import io

import numpy as np
import torch

from dali_pipes.formats.image_kind import image_kind


def decode_rgb(data: np.ndarray) -> torch.Tensor:
    """Encoded image bytes -> uint8 tensor (3, H, W).

    Args:
        data: the whole encoded image as a uint8 numpy array.

    Returns:
        The RGB pixels (alpha dropped, palettes and gray expanded).
    """
    if image_kind(data) in ("bmp", "tiff"):
        from PIL import Image
        with Image.open(io.BytesIO(data.tobytes())) as image:
            pixels = np.asarray(image.convert("RGB"))
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1).contiguous()
    from torchvision.io import ImageReadMode, decode_image
    image = decode_image(torch.from_numpy(data), mode=ImageReadMode.RGB)
    if image.dtype == torch.uint16:
        image = (image.to(torch.int32) >> 8).to(torch.uint8)
    return image
