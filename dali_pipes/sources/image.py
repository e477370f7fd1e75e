"""Image source: image files (JPEG, PNG, GIF, BMP, TIFF, WebP, JPEG 2000) in class folders
(and their sub-folders), local or behind a URL of a listable store (`s3://bucket/train/`),
addressed by dataset index."""
from __future__ import annotations

import os

import numpy as np

from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.image_kind import IMAGE_SUFFIXES, prepare_image
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.folders import PathLike, list_class_folders
from dali_pipes.sources.protocol import Source
from dali_pipes.sources.remote_folders import Objects, holds_shards, list_remote_class_folders
from dali_pipes.sources.shard_names import names_shard
from dali_pipes.stores.remote import FsspecStore, StoreError, is_url

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


def remote_roots(data) -> list[str]:
    """The URLs `data` names when it is one or a list of URLs (else []); ValueError for a
    list mixing URLs and local folders."""
    items = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    urls = [is_url(i) for i in items]
    if any(urls) and not all(urls):
        raise ValueError(f"data: a list of URLs or of local folders, not both: {items}")
    return [str(i) for i in items] if items and all(urls) else []


def class_folder_objects(data, store: FsspecStore) -> list[Objects] | None:
    """For `data` naming folders behind URLs (no `.tar` URL or brace pattern) that hold
    class folders rather than `.tar` shards: every object under each, from one listing call
    per URL; None for local data, shard URLs and URL folders of shards. http(s) folders
    cannot be listed: they are shards when their page links `.tar` files, else ValueError
    (from `FsspecStore.list_objects`)."""
    urls = remote_roots(data)
    if not urls or any(names_shard(u) or "{" in u for u in urls):
        return None
    if any(u.startswith(("http://", "https://")) for u in urls):
        if any(_linked_shards(u, store) for u in urls):
            return None
        store.list_objects(urls[0])  # raises: says what to use instead
    listed = [store.list_objects(u) for u in urls]
    return None if any(holds_shards(u, o) for u, o in zip(urls, listed, strict=True)) \
        else listed


def _linked_shards(url: str, store: FsspecStore) -> bool:
    try:
        return bool(store.glob(url.rstrip("/") + "/*.tar"))
    except StoreError:  # no page to read links from: not shards
        return False


class ImageFolderSource(Source):
    """`root/<class>/<image>` (or a list of such roots, one per source).

    `max_pixels`: images whose header claims more pixels are bad samples (FormatError
    naming the file and the size, before decoding); None disables the limit.
    The roots may be URLs of a listable fsspec store (`s3://bucket/train/`, all roots
    URLs then): listed with one call per root (or given as `objects`, the listing
    `class_folder_objects` made) and read through `store` (default: an FsspecStore without
    cache; its retries, timeouts and block cache apply).
    `file_stats`: when local files' sizes and times (hashed by `listing_digest`) are taken:
    "lazy" on first use, "listing" while listing (`dali_pipes.sources.file_stats`).
    """

    def __init__(self, data: PathLike | list[PathLike], *,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS, store: FsspecStore | None = None,
                 objects: list[Objects] | None = None, file_stats: str = "lazy"):
        self.max_pixels = check_max_pixels(max_pixels)
        urls = remote_roots(data)
        self.store = (store or FsspecStore()) if urls else None
        if self.store is not None:
            if objects is None:
                objects = [self.store.list_objects(u) for u in urls]
            self.listing = list_remote_class_folders(urls, objects, IMAGE_EXTENSIONS, "image")
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

    def read(self, index: int) -> np.ndarray:
        """The file's bytes as a uint8 array (OSError / FormatError name the file; a FIFO
        or other non-regular file is refused without blocking; behind a URL: StoreError
        naming it after the store's retries, EOFError when it changed since the listing)."""
        if self.store is not None:
            return self.store.read_object(self.files[index], int(self.listing.sizes[index]),
                                          int(self.listing.mtimes_ns[index]))
        return read_file_bytes(self.files[index])

    def read_checked(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """(bytes, (height, width)); FormatError when the file is no complete, sound image
        (for JPEG: header and scan structure) or exceeds `max_pixels` (a GIF comes back as
        its first frame in PNG: `prepare_image`)."""
        return prepare_image(self.read(index), self.files[index], max_pixels=self.max_pixels)
