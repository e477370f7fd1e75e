"""The source options of make_loader (which files, which columns, which annotations, how
large), for images and for detection."""
from __future__ import annotations

from dataclasses import dataclass

from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS


@dataclass(frozen=True)
class ImageSourceOptions:
    """`max_pixels`: images whose header (or any frame) claims more pixels are bad samples
    (None: no limit); `image_column` / `label_column`: the columns of a Hugging Face
    `datasets.Dataset` (default "image" / "label", see dali_pipes.sources.hf)."""

    max_pixels: int | None = DEFAULT_MAX_PIXELS
    image_column: str | None = None
    label_column: str | None = None


DEFAULT_ANNOTATIONS = "instances.json"  # the detection loader's default `annotations`


@dataclass(frozen=True)
class DetectionSourceOptions:
    """Which annotations and targets: the COCO `annotations` file (relative: in each images
    folder), `categories` (COCO category dicts, for shards), `crowd` ("drop" or "keep"),
    `masks` and `semantic` (the mask fields), `max_pixels` (as for images)."""

    annotations: str = DEFAULT_ANNOTATIONS
    categories: list | None = None
    crowd: str = "drop"
    masks: bool = False
    semantic: bool = False
    max_pixels: int | None = DEFAULT_MAX_PIXELS
