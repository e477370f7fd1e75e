"""The torch path's decode (torch_bridge/modalities/image_decode.py) against Pillow on real
files: stored pixels without orientation (Pillow's own turn of a TIFF undone), the
displayed image with it, RGBA with alpha."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from dali_pipes.formats.image_decode import ImageDecode, prepare_decode
from torch_bridge.modalities.image_decode import decode_image_tensor, decode_rgb, orient_tensor

H, W = 14, 22


def _rgba() -> np.ndarray:
    y, x = np.mgrid[:H, :W]
    return np.stack([x * 11, y * 17, x + y, 255 - x * 9], -1).astype(np.uint8)


def _file(fmt: str, orientation: int, mode: str = "RGB", **kw) -> np.ndarray:
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(_rgba(), "RGBA").convert(mode).save(out, fmt, exif=exif.tobytes(), **kw)
    return np.frombuffer(out.getvalue(), np.uint8).copy()  # writable, as file reads are


def _chw(pixels: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(pixels, order="C")).permute(2, 0, 1)


@pytest.mark.parametrize("fmt,kw", [("PNG", {}), ("TIFF", {}), ("WEBP", {"lossless": True})])
def test_rgb_is_decoded_as_stored(fmt, kw):
    data = _file(fmt, 6, **kw)
    assert torch.equal(decode_rgb(data), _chw(_rgba()[..., :3]))


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_orientation_and_alpha_match_pillows_exif_transpose(fmt, orientation):
    data = _file(fmt, orientation, "RGBA")
    decode = ImageDecode(orientation=True, alpha=True)
    _, size, got, plane = prepare_decode(data, (H, W), "x", decode)
    image = decode_image_tensor(data, got, plane, alpha=True)
    want = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data.tobytes()))))
    assert image.shape == (4, *size) and torch.equal(image, _chw(want))


def test_opaque_images_get_alpha_255_and_orient_tensor_undoes_itself():
    data = _file("JPEG", 1, quality=95)
    image = decode_image_tensor(data, 1, None, alpha=True)
    assert image.shape == (4, H, W) and (image[3] == 255).all()
    x = torch.arange(2 * H * W).view(2, H, W)
    for o, back in ((6, 8), (8, 6), (5, 5), (7, 7), (3, 3)):
        assert torch.equal(orient_tensor(orient_tensor(x, o), back), x)
