"""Image source: image files (JPEG, PNG, GIF, BMP, TIFF, WebP, JPEG 2000) in class folders
(and their sub-folders), addressed by dataset index."""
from __future__ import annotations

import numpy as np

from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.folders import PathLike, list_class_folders

# Files with these suffixes are samples; one that holds no image format (recognised from its
# bytes, dali_pipes.formats.image_kind) is a bad sample (under on_error), never left out.
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".gif",
                              ".tif", ".tiff", ".webp", ".jp2", ".j2k", ".j2c", ".jpc",
                              ".jpf"})


def check_max_pixels(max_pixels) -> int | None:
    """`max_pixels` validated: a positive int or None (ValueError naming the option)."""
    if max_pixels is None:
        return None
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, (int, np.integer)) \
            or max_pixels < 1:
        raise ValueError(f"max_pixels must be a positive int or None, got {max_pixels!r}")
    return int(max_pixels)


class ImageFolderSource:
    """`root/<class>/<image>` (or a list of such roots, one per source).

    `max_pixels`: images whose header claims more pixels are bad samples (FormatError
    naming the file and the size, before decoding); None disables the limit.
    """

    def __init__(self, data: PathLike | list[PathLike], *,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self.max_pixels = check_max_pixels(max_pixels)
        self.listing = list_class_folders(data, IMAGE_EXTENSIONS, "image",
                                          recursive=True)
        self.roots = self.listing.roots
        self.classes = self.listing.classes
        self.files = self.listing.files
        self.labels = self.listing.labels
        self.source_ids = self.listing.source_ids
        self.ignored = self.listing.ignored

    def __len__(self) -> int:
        return len(self.files)

    def path(self, index: int) -> str:
        return self.files[index]

    def listing_digest(self) -> str:
        """Names (relative to their root), sizes and modification times of every sample."""
        return self.listing.digest()

    def read(self, index: int) -> np.ndarray:
        """The file's bytes as a uint8 array (OSError / FormatError name the file; a FIFO
        or other non-regular file is refused without blocking)."""
        return read_file_bytes(self.files[index])

    def read_checked(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """(bytes, (height, width)); FormatError when the file is no complete, sound image
        (for JPEG: header and scan structure) or exceeds `max_pixels` (a GIF comes back as
        its first frame in PNG: `prepare_image`)."""
        return prepare_image(self.read(index), self.files[index], max_pixels=self.max_pixels)
