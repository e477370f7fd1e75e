"""Decoding any image format the image source accepts to uint8 pixels (the torch path).

torchvision's `decode_image` reads JPEG, PNG and WebP (GIFs arrive as PNG, see
`dali_pipes.formats.image_kind.prepare_image`); BMP, TIFF and JPEG 2000 go through PIL.
16-bit PNGs, TIFFs and JPEG 2000 files come out as uint8 by their high byte, as DALI's
decoder gives them. The
pixels are those stored in the file (Pillow's own turn of a TIFF with an Orientation tag
is undone, as DALI does not apply it); `decode_image_tensor` then applies the EXIF
orientation and adds the alpha channel when `dali_pipes.formats.image_decode.ImageDecode`
asks, with the same numpy steps the DALI feed uses.
"""
from __future__ import annotations

import io
import math

import numpy as np
import torch

from dali_pipes.formats.exif import exif_orientation, inverse_orientation, orientation_steps
from dali_pipes.formats.image_kind import image_kind
from dali_pipes.recipes import ImageRecipe

_PIL_KINDS = ("bmp", "tiff", "jp2", "j2k")


def decode_rgb(data: np.ndarray) -> torch.Tensor:
    """Encoded image bytes -> uint8 tensor (3, H, W) as stored (no EXIF orientation).

    Args:
        data: the whole encoded image as a uint8 numpy array.

    Returns:
        The RGB pixels (alpha dropped, palettes and gray expanded).
    """
    kind = image_kind(data)
    if kind in _PIL_KINDS:
        from PIL import Image
        with Image.open(io.BytesIO(data.tobytes())) as image:
            pixels = _pil_rgb(image)
        image_t = torch.from_numpy(pixels.copy()).permute(2, 0, 1)
        if kind == "tiff":  # Pillow turned it by its Orientation tag: undo
            image_t = orient_tensor(image_t, inverse_orientation(exif_orientation(data)))
        return image_t.contiguous()
    from torchvision.io import ImageReadMode, decode_image
    image = decode_image(torch.from_numpy(data), mode=ImageReadMode.RGB)
    if image.dtype == torch.uint16:
        image = (image.to(torch.int32) >> 8).to(torch.uint8)
    return image


def _pil_rgb(image) -> np.ndarray:
    """(H, W, 3) uint8 of a Pillow image; 16-bit gray by its high byte, as DALI decodes it
    (Pillow's convert would clip it at 255)."""
    if image.mode.startswith("I;16"):
        gray = (np.asarray(image).astype(np.uint16) >> 8).astype(np.uint8)
        return np.stack([gray] * 3, -1)
    return np.asarray(image.convert("RGB"))


def decode_image_tensor(data: np.ndarray, orientation: int, plane: np.ndarray | None,
                        alpha: bool) -> torch.Tensor:
    """Encoded image -> uint8 (3, H, W) turned by `orientation`, or (4, H, W) with `alpha`
    (`plane` the displayed alpha, None: opaque), as
    `dali_pipes.formats.image_decode.prepare_decode` gives them."""
    image = orient_tensor(decode_rgb(data), orientation)
    if not alpha:
        return image
    channel = torch.full((1, *image.shape[1:]), 255, dtype=torch.uint8) if plane is None \
        else torch.from_numpy(plane)[None]
    return torch.cat([image, channel]).contiguous()


def orient_tensor(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """(C, H, W) pixels as displayed under an EXIF orientation (as `orient_array`)."""
    transpose, rows, cols = orientation_steps(orientation)
    if transpose:
        image = image.transpose(-2, -1)
    dims = [d for d, used in ((-2, rows), (-1, cols)) if used]
    return image.flip(dims) if dims else image


def split_alpha_norm(options: dict, keep: bool) -> tuple[dict, tuple[float, float]]:
    """(recipe options with 1 or 3 mean/std values, (alpha mean, alpha std)): with
    `keep`, a 4th `mean`/`std` value is the alpha's (default 0 and 1 on the 0..1 scale);
    without, the options as they are (the recipe refuses 4 values)."""
    alpha_norm = [0.0, 1.0]
    if not keep:
        return options, (0.0, 1.0)
    options = dict(options)
    for slot, name in enumerate(("mean", "std")):
        value = options.get(name)
        if isinstance(value, (tuple, list)) and len(value) == 4:
            options[name], alpha_norm[slot] = tuple(value[:3]), value[3]
    mean, std = alpha_norm
    if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
        raise ValueError(f"image option mean: the alpha value {mean!r} is not allowed; "
                         f"expected a finite number")
    if isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 < std < math.inf:
        raise ValueError(f"image option std: the alpha value {std!r} is not allowed; "
                         f"expected a number > 0")
    return options, (float(mean), float(std))


def with_alpha_channel(recipe: ImageRecipe, mean: float = 0.0, std: float = 1.0
                       ) -> ImageRecipe:
    """`recipe` normalising a 4th (alpha) channel with `mean`, `std` on the 0..1 scale;
    ValueError for the options that work on RGB only."""
    import dataclasses

    if recipe.photometric.active or recipe.policy.active:
        raise ValueError("image option alpha='keep' works on RGB + alpha images, which "
                         "color_jitter, grayscale, blur and auto_augment do not take; "
                         "expected alpha='drop' with them")
    out = recipe.output
    rgb_mean, rgb_std = (v * 3 if len(v) == 1 else v for v in (out.mean, out.std))
    out = dataclasses.replace(out, mean=(*rgb_mean, mean), std=(*rgb_std, std))
    return dataclasses.replace(recipe, output=out)
