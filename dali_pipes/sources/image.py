"""Image source: image files (JPEG, PNG, GIF, BMP, TIFF, WebP, JPEG 2000) in class folders
(and their sub-folders), local, behind a URL of a listable store (`s3://bucket/train/`) or
in a store handed in, addressed by dataset index."""
from __future__ import annotations

import numpy as np

from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.image_kind import IMAGE_SUFFIXES, prepare_image
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.folders import PathLike, list_class_folders
from dali_pipes.sources.protocol import EncodedImage, ImageRead, ImageSource
from dali_pipes.sources.remote_folders import Objects, list_remote_class_folders
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store, store_paths

# Files with these suffixes are samples; one that holds no image format (recognised from its
# bytes, dali_pipes.formats.image_kind) is a bad sample (under on_error), never left out.
IMAGE_EXTENSIONS = IMAGE_SUFFIXES


def check_max_pixels(max_pixels) -> int | None:
    """`max_pixels` validated: a positive int or None (ValueError naming the option)."""
    if max_pixels is None:
        return None
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, (int, np.integer)) \
            or max_pixels < 1:
        raise ValueError(f"max_pixels must be a positive int or None, got {max_pixels!r}")
    return int(max_pixels)


class ImageReads(ImageSource):
    """`read` (`ImageSource`) for every image source: the subclass's `_bytes(index)`,
    checked by `prepare_image` (and by `_check_size` where the listing knows the size)."""

    max_pixels: int | None

    def _bytes(self, index: int) -> np.ndarray:
        """The stored bytes of sample `index` as a uint8 array (errors name the file)."""
        raise NotImplementedError

    def _check_size(self, index: int, size: tuple[int, int]) -> None:
        """Subclasses: FormatError when a sound image is not the size its listing says."""

    def read(self, index: int, request: ImageRead | None = None) -> EncodedImage:
        """(bytes, (height, width)); FormatError when the image is no complete, sound image
        (for JPEG: header and scan structure) or exceeds `max_pixels` (a GIF comes back as
        its first frame in PNG: `prepare_image`). `ImageRead(check=False)`: the stored
        bytes, size None."""
        data = self._bytes(index)
        if request is not None and not request.check:
            return EncodedImage(data, None)
        data, size = prepare_image(data, self.path(index), max_pixels=self.max_pixels)
        self._check_size(index, size)
        return EncodedImage(data, size)


class ImageFolderSource(ImageReads):
    """`root/<class>/<image>` (or a list of such roots, one per source).

    `max_pixels`: images whose header claims more pixels are bad samples (FormatError
    naming the file and the size, before decoding); None disables the limit.
    `store`: where the roots are (default: local files, or an FsspecStore without cache for
    URLs). A store other than the local one (`s3://bucket/train/`, a store handed in) is
    listed with one call per root (or given as `objects`, the listing
    `dali_pipes.sources.layout` made) and read through its `read_range` (for an
    FsspecStore its retries, timeouts and block cache apply).
    `file_stats`: when local files' sizes and times (hashed by `listing_digest`) are taken:
    "lazy" on first use, "listing" while listing (`dali_pipes.sources.file_stats`).
    """

    def __init__(self, data: PathLike | list[PathLike], *,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS, store: Store | None = None,
                 objects: list[Objects] | None = None, file_stats: str = "lazy"):
        self.max_pixels = check_max_pixels(max_pixels)
        store = store or open_store(data)
        roots = store_paths(data, store)
        self.store = store if roots else None  # None: local files, walked and read directly
        if self.store is not None:
            if objects is None:
                objects = [self.store.list(r) for r in roots]
            self.listing = list_remote_class_folders(roots, objects, IMAGE_EXTENSIONS, "image")
        else:
            self.listing = list_class_folders(data, IMAGE_EXTENSIONS, "image", recursive=True,
                                              file_stats=file_stats)
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

    def _bytes(self, index: int) -> np.ndarray:
        """The file's bytes (OSError / FormatError name the file; a FIFO or other
        non-regular file is refused without blocking; behind a URL: StoreError naming it
        after the store's retries, EOFError when it changed since the listing)."""
        if self.store is not None:
            size = int(self.listing.sizes[index])
            return self.store.read_range(self.files[index], 0, size,
                                         (size, int(self.listing.mtimes_ns[index])))
        return read_file_bytes(self.files[index])
