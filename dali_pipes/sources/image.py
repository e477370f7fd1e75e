"""Image source: image files (JPEG, PNG, GIF, BMP, TIFF, WebP) in class folders (and their
sub-folders), addressed by dataset index."""
from __future__ import annotations

import os

import numpy as np

from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.sources.folders import PathLike, list_class_folders

# Files with these suffixes are samples; one that holds no image format (recognised from its
# bytes, dali_pipes.formats.image_kind) is a bad sample (under on_error), never left out.
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".bmp", ".gif",
                              ".tif", ".tiff", ".webp"})


class ImageFolderSource:
    """`root/<class>/<image>` (or a list of such roots, one per source)."""

    def __init__(self, data: PathLike | list[PathLike]):
        listing = list_class_folders(data, IMAGE_EXTENSIONS, "image", recursive=True)
        self.roots = listing.roots
        self.classes = listing.classes
        self.files = listing.files
        self.labels = listing.labels
        self.source_ids = listing.source_ids
        self.ignored = listing.ignored

    def __len__(self) -> int:
        return len(self.files)

    def path(self, index: int) -> str:
        return self.files[index]

    def read(self, index: int) -> np.ndarray:
        """The file's bytes as a uint8 array (OSError names the file)."""
        with open(self.files[index], "rb") as f:
            data = np.empty(os.fstat(f.fileno()).st_size, dtype=np.uint8)
            got = f.readinto(data)
        return data[:got]

    def read_checked(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """(bytes, (height, width)); FormatError when the file is no complete image
        (a GIF comes back as its first frame in PNG: `prepare_image`)."""
        return prepare_image(self.read(index), self.files[index])
