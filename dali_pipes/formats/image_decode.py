"""How both backends decode an image: EXIF orientation and the alpha channel (numpy only).

`adjust_orientation` (default False, as torchvision's `decode_image` and its ImageFolder
loader): with True an image is turned and flipped as its EXIF Orientation tag says
(`dali_pipes.formats.exif`), and the plan's crop window is drawn on the displayed image
(height and width swapped for orientations 5-8). The DALI graph decodes with
`adjust_orientation=True`, whose slice window refers to the displayed image; the torch
path applies the same tag with `orient_array`'s steps.

`alpha="keep"` (default "drop"): images come out with 4 channels, RGB then alpha; an image
without transparency gets alpha 255 (opaque). The colour is decoded as for "drop"; the
alpha plane of an image with transparency (PNG, WebP, TIFF, JPEG 2000, BMP with an alpha
channel or a tRNS/palette transparency, GIFs with a transparent colour) is decoded by
Pillow in the feed and cropped to the plan's window there (`alpha_windows`), because
DALI 2.4's CPU decoder has no RGBA output type and its native-channels output
(`types.ANY_DATA`) aborts the process on some gray JPEGs.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, fields

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.exif import (
    exif_orientation,
    inverse_orientation,
    orient_array,
    oriented_size,
)
from dali_pipes.formats.image_kind import image_kind

ALPHA_MODES = ("drop", "keep")
_MAY_HAVE_ALPHA = frozenset({"png", "webp", "tiff", "jp2", "j2k", "bmp"})


@dataclass(frozen=True)
class ImageDecode:
    """Decode options shared by the DALI graph, its feed and the torch path."""

    orientation: bool = False  # apply the EXIF Orientation tag
    alpha: bool = False  # 4 channels: RGB + alpha

    @property
    def is_default(self) -> bool:
        return not (self.orientation or self.alpha)


@dataclass(frozen=True)
class DecodeOptions:
    """make_loader's decode options (docs/data_sources.md): `adjust_orientation` turns and
    flips each image as its EXIF Orientation tag says; `alpha` "drop" (RGB) or "keep"
    (RGB + alpha). `image_decode` validates them into an `ImageDecode`."""

    adjust_orientation: bool = False
    alpha: str = "drop"


DECODE_DEFAULTS = {f.name: f.default for f in fields(DecodeOptions)}


def image_decode(**given) -> ImageDecode:
    """Validated decode options (ValueError naming the option, the value and what is
    allowed); options not given keep `DecodeOptions`' defaults."""
    options = {**DECODE_DEFAULTS, **given}
    adjust_orientation, alpha = options["adjust_orientation"], options["alpha"]
    if not isinstance(adjust_orientation, (bool, np.bool_)):
        raise ValueError(f"image option adjust_orientation={adjust_orientation!r} is not "
                         f"allowed; expected True or False")
    if alpha not in ALPHA_MODES:
        raise ValueError(f"image option alpha={alpha!r} is not allowed; expected one of "
                         f"{', '.join(repr(m) for m in ALPHA_MODES)}")
    return ImageDecode(orientation=bool(adjust_orientation), alpha=alpha == "keep")


def prepare_decode(data, size: tuple[int, int], path, decode: ImageDecode
                   ) -> tuple[object, tuple[int, int], int, np.ndarray | None]:
    """What both backends need to decode one checked image under `decode`.

    Args:
        data: the encoded image (as an image source's checked `read` gives it).
        size: its header (height, width), as stored.
        path: what to name in errors.
        decode: the options.

    Returns:
        (data, displayed (height, width) the plan draws the window on, EXIF orientation
        (1 without `decode.orientation`), the displayed alpha plane or None (none without
        `decode.alpha`, or no transparency)).
    """
    orientation = exif_orientation(data) if decode.orientation else 1
    plane = alpha_plane(data, path, orientation) if decode.alpha else None
    return data, oriented_size(size, orientation), orientation, plane


def alpha_plane(data, path="<bytes>", orientation: int = 1) -> np.ndarray | None:
    """The alpha channel (H, W) uint8 as displayed under `orientation`, or None for an
    image without transparency (FormatError naming `path` when Pillow cannot decode it)."""
    if image_kind(data) not in _MAY_HAVE_ALPHA:
        return None
    from PIL import Image
    try:
        with Image.open(io.BytesIO(bytes(data))) as image:
            if "A" not in image.getbands() and "transparency" not in image.info:
                return None
            stored = _stored_orientation(image, data)
            has_channel = "A" in image.getbands()  # else a transparent colour
            plane = np.asarray((image if has_channel else image.convert("RGBA")).getchannel("A"))
    except (OSError, ValueError, SyntaxError) as exc:
        raise FormatError(path, "alpha channel", f"cannot be decoded ({exc})") from exc
    return np.array(orient_array(orient_array(plane, stored), orientation), order="C")


def alpha_windows(planes, windows: np.ndarray) -> list[np.ndarray]:
    """Each image's alpha in its crop window, uint8 (h, w, 1) (255 where it has none).

    Args:
        planes: per image the displayed alpha plane (H, W) or None (opaque).
        windows: int (B, 4) top, left, height, width on the displayed images.
    """
    out = []
    for plane, (top, left, h, w) in zip(planes, windows.tolist(), strict=True):
        out.append(np.full((h, w, 1), 255, np.uint8) if plane is None else
                   np.ascontiguousarray(plane[top:top + h, left:left + w, None]))
    return out


def _stored_orientation(image, data) -> int:
    """The steps that undo Pillow's own orientation: Pillow applies a TIFF's Orientation
    tag on load, DALI (without adjust_orientation) and the other formats do not."""
    if image.format != "TIFF":
        return 1
    return inverse_orientation(exif_orientation(data))


__all__ = ["ALPHA_MODES", "ImageDecode", "alpha_plane", "alpha_windows", "image_decode",
           "prepare_decode"]
