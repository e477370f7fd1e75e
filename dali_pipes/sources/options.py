"""The image source options of make_loader (which files, which columns, how large)."""
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
