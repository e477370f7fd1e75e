"""Decode options shared by both backends: validation, displayed sizes and alpha planes
read from real files written by Pillow."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_decode import (
    ImageDecode,
    alpha_plane,
    alpha_windows,
    image_decode,
    prepare_decode,
)

H, W = 14, 22


def _rgba() -> np.ndarray:
    y, x = np.mgrid[:H, :W]
    return np.stack([x * 11, y * 17, x + y, 255 - x * 9], -1).astype(np.uint8)


def _save(image: Image.Image, fmt: str, orientation: int | None = None, **kw) -> bytes:
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kw["exif"] = exif.tobytes()
    out = io.BytesIO()
    image.save(out, fmt, **kw)
    return out.getvalue()


def test_options_are_validated_naming_option_value_and_allowed():
    assert image_decode() == ImageDecode() and ImageDecode().is_default
    assert image_decode(adjust_orientation=True, alpha="keep") == ImageDecode(True, True)
    with pytest.raises(ValueError, match=r"adjust_orientation=1 .*True or False"):
        image_decode(adjust_orientation=1)
    with pytest.raises(ValueError, match=r"alpha='RGBA' .*'drop', 'keep'"):
        image_decode(alpha="RGBA")


@pytest.mark.parametrize("fmt,kw", [("PNG", {}), ("WEBP", {"lossless": True}), ("TIFF", {}),
                                    ("JPEG2000", {})])
def test_alpha_planes_are_pillows(fmt, kw):
    data = _save(Image.fromarray(_rgba(), "RGBA"), fmt, **kw)
    assert np.array_equal(alpha_plane(data, "x"), _rgba()[..., 3])


@pytest.mark.parametrize("orientation", [3, 6, 8])
@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_alpha_planes_follow_the_orientation(fmt, orientation):
    """Pillow turns a TIFF on load, a PNG not: either way the plane comes out as stored
    (orientation 1) or as displayed, as exif_transpose shows it."""
    data = _save(Image.fromarray(_rgba(), "RGBA"), fmt, orientation)
    assert np.array_equal(alpha_plane(data, "x"), _rgba()[..., 3])
    want = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))))[..., 3]
    assert np.array_equal(alpha_plane(data, "x", orientation), want)
    _, size, got_orientation, plane = prepare_decode(
        data, (H, W), "x", ImageDecode(orientation=True, alpha=True))
    assert got_orientation == orientation and size == want.shape
    assert np.array_equal(plane, want)


def test_transparent_colours_and_opaque_images():
    palette = Image.fromarray((_rgba()[..., 0] // 64).astype(np.uint8), "P")
    palette.putpalette([v for i in range(256) for v in (i * 60 % 256, 0, 0)])
    plane = alpha_plane(_save(palette, "PNG", transparency=1), "p.png")
    assert np.array_equal(plane == 0, _rgba()[..., 0] // 64 == 1)
    rgb = Image.fromarray(_rgba()[..., :3])
    for fmt in ("PNG", "JPEG", "WEBP", "BMP", "TIFF"):
        assert alpha_plane(_save(rgb, fmt), fmt) is None, fmt
    assert prepare_decode(_save(rgb, "JPEG", 6), (H, W), "x", ImageDecode())[1:] == \
        ((H, W), 1, None)


def test_alpha_windows_crop_the_plane_or_fill_255():
    plane = _rgba()[..., 3]
    windows = np.array([[2, 3, 5, 7], [0, 0, H, W]])
    got = alpha_windows([plane, None], windows)
    assert got[0].shape == (5, 7, 1) and np.array_equal(got[0][..., 0], plane[2:7, 3:10])
    assert got[1].shape == (H, W, 1) and (got[1] == 255).all()


def test_an_alpha_channel_pillow_cannot_decode_names_the_file():
    data = _save(Image.fromarray(_rgba(), "RGBA"), "PNG")
    cut = data[:len(data) // 2] + data[-12:]  # IEND kept: the header check passes
    with pytest.raises(FormatError, match=r"^cut\.png: alpha channel: cannot be decoded"):
        alpha_plane(cut, "cut.png")
