"""Detection source: an images folder and its COCO instances file, addressed by index.

Samples are the file's images in the order of their image ids (`open_coco` sorts them);
with a list of folders (one per source), the sources follow each other in order. A relative
`annotations` path names a file in each images folder (for one folder, a path that exists
relative to the working directory is taken as it is). Every image named in the file must
exist when the source is made (FormatError naming the image id and the file otherwise);
its bytes are checked as the image modality checks them (format from the bytes, header
size) when read, and a header size other than the file's "height" / "width" is a bad
sample. Labels are contiguous over the union of the sources' category ids, in sorted order.

`crowd="drop"` (default, as torchvision's detection references train) leaves iscrowd
annotations out of the targets; `crowd="keep"` keeps them, flagged in "iscrowd".
`labels` (one per image, for class-balanced sampling): the image's most frequent label,
ties to the smaller; `len(classes)` for an image without boxes.

In a store other than local files (`s3://bucket/images/` with
`annotations="s3://bucket/instances.json"`, or a store handed in; a relative `annotations`
names an object in the images folder, an absolute path or a URL is taken as it is): the
annotation file is read once through the store and validated as a local one; every image it
names must be in the folder's listing (one call per folder; folders that cannot be listed,
such as http(s) ones, take one stat per image); images are read whole through the store
(for URLs: retries, timeouts, block cache).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from dali_pipes.formats.coco import CocoDataset, empty_polygons, open_coco, parse_coco
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.folders import listing_digest, names_in
from dali_pipes.sources.image import ImageReads, check_max_pixels
from dali_pipes.sources.options import DEFAULT_ANNOTATIONS
from dali_pipes.stores import Store
from dali_pipes.stores.remote import is_url
from dali_pipes.stores.select import can_list, local_files, open_store


def annotation_path(images_dir: str | os.PathLike, annotations: str | os.PathLike,
                    single: bool) -> Path:
    """Where the annotation file of `images_dir` is (see the module docstring)."""
    given = Path(annotations)
    if given.is_absolute() or (single and given.exists()):
        return given
    return Path(images_dir) / given


def _local_coco(images_dir, annotations, single: bool) -> CocoDataset:
    """The COCO file of a local images folder; FileNotFoundError naming the option when
    there is none (the default, "instances.json" inside the folder, is only a guess)."""
    path = annotation_path(images_dir, annotations, single)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no COCO annotation file for the images in {images_dir}; pass "
            f"annotations= (the COCO JSON's path, or its name inside the images folder; "
            f"default {annotations!r})")
    return open_coco(path)


class AnnotatedImages(ImageReads):
    """What every detection source shares: `files` (one image each) and the flattened
    annotation rows of image i at `rows(i)` (`offsets` has len(files) + 1 entries)."""

    files: tuple[str, ...]
    offsets: np.ndarray
    box_labels: np.ndarray
    segmentations: tuple
    classes: tuple[str, ...]
    heights: np.ndarray  # int64, the annotations' size of each image
    widths: np.ndarray

    def __len__(self) -> int:
        return len(self.files)

    def rows(self, i: int) -> slice:
        """The annotation rows of sample `i`."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def path(self, index: int) -> str:
        return self.files[index]

    def annotation_file(self, index: int) -> str:
        """The annotation file (or shard member) sample `index` comes from."""
        raise NotImplementedError

    def _check_size(self, index: int, size: tuple[int, int]) -> None:
        """FormatError naming the file unless the image is the annotations' height and
        width."""
        want = (int(self.heights[index]), int(self.widths[index]))
        if tuple(size) != want:
            raise FormatError(self.files[index], "image size", "differs from the "
                              "annotations' height and width", value=size, expected=want)

    def empty_segmentations(self) -> dict[str, int]:
        """Annotation file -> how many of its (kept) annotations have an empty
        segmentation (`[]`, no polygon): their masks are all zeros."""
        rows = np.flatnonzero(empty_polygons(self.segmentations))
        counts: dict[str, int] = {}
        for sample in (np.searchsorted(self.offsets, rows, side="right") - 1).tolist():
            name = self.annotation_file(sample)
            counts[name] = counts.get(name, 0) + 1
        return counts

    def _image_labels(self) -> np.ndarray:
        """Each image's most frequent box label; len(classes) for an image without boxes."""
        out = np.full(len(self.files), len(self.classes), np.int64)
        for i in range(len(self.files)):
            labels = self.box_labels[self.rows(i)]
            if len(labels):
                out[i] = int(np.argmax(np.bincount(labels)))
        return out


class DetectionSource(AnnotatedImages):
    """Images + COCO annotations (one folder, or a list of folders each with its own file).

    Attributes (per sample): files, image_ids, heights, widths, source_ids, labels; per
    annotation row (kept after `crowd`): boxes (float64 x1, y1, x2, y2), box_labels,
    iscrowd, ann_ids, segmentations, with `rows(i)` the rows of sample i. `classes`: the
    category names in label order; `category_ids`: the COCO id of each label.
    """

    def __init__(self, data, *, annotations=DEFAULT_ANNOTATIONS, crowd: str = "drop",
                 max_pixels: int | None = DEFAULT_MAX_PIXELS, store: Store | None = None):
        if crowd not in ("drop", "keep"):
            raise ValueError(f"crowd must be 'drop' or 'keep', got {crowd!r}")
        self.max_pixels = check_max_pixels(max_pixels)
        folders = list(data) if isinstance(data, (list, tuple)) else [data]
        if not folders:
            raise ValueError("data is an empty list of folders")
        self.roots = [os.fspath(f) for f in folders]
        store = store or open_store(data)
        self.store = None if local_files(store) else store  # None: local files
        if self.store is not None:
            self.datasets = [self._remote_coco(f, annotations) for f in self.roots]
        else:
            self.datasets = [_local_coco(f, annotations, len(folders) == 1)
                             for f in folders]
        self._union_categories()
        self._flatten(crowd == "drop")
        if self.store is not None:
            self._list_objects()
        else:
            self._stat_files()

    def _remote_coco(self, root: str, annotations) -> CocoDataset:
        """The annotation file of the images folder `root` (in the store), read once."""
        assert self.store is not None
        name = os.fspath(annotations)
        url = name if is_url(name) or name.startswith("/") else f"{root.rstrip('/')}/{name}"
        size, version = self.store.stat(url)
        return parse_coco(url, self.store.read_range(url, 0, size, (size, version)).tobytes())

    def _list_objects(self) -> None:
        """Sizes and versions of every image from one listing per folder (a store that
        cannot list the folder, such as http(s): a stat per image); FormatError naming the
        image id and the annotation file for one that is missing."""
        assert self.store is not None
        found: dict[str, tuple[int, int]] = {}
        for root in self.roots if can_list(self.store) else ():
            try:
                found.update((u, (n, v)) for u, n, v in self.store.list(root))
            except ValueError:  # http(s): no listing
                pass
        stats = []
        for i, url in enumerate(self.files):
            if url not in found:
                try:
                    found[url] = self.store.stat(url)
                except OSError as exc:
                    if not isinstance(exc, (FileNotFoundError, PermissionError)) and \
                            getattr(exc, "status", None) != 403:
                        raise
                    ds = self.datasets[int(self.source_ids[i])]
                    raise FormatError(ds.path, f"image {int(self.image_ids[i])}.file_name",
                                      f"{url} cannot be read ({exc})") from exc
            stats.append(found[url])
        self.sizes = np.asarray([s for s, _ in stats], np.int64)
        self.mtimes_ns = np.asarray([v for _, v in stats], np.int64)

    def _union_categories(self) -> None:
        names: dict[int, str] = {}
        for ds in self.datasets:
            for cid, name in zip(ds.category_ids.tolist(), ds.category_names, strict=True):
                if names.setdefault(cid, name) != name:
                    raise FormatError(ds.path, f"category {cid}.name",
                                      "differs from another source's", value=name,
                                      expected=names[cid])
        self.category_ids = np.asarray(sorted(names), np.int64)
        self.classes = tuple(names[int(c)] for c in self.category_ids)

    def _flatten(self, drop_crowd: bool) -> None:
        files, parts, counts, sources = [], [], [], []
        for s, (root, ds) in enumerate(zip(self.roots, self.datasets, strict=True)):
            remap = np.searchsorted(self.category_ids, ds.category_ids)
            keep = ~ds.iscrowd if drop_crowd else np.ones(len(ds.ann_ids), bool)
            files += [os.path.join(root, name) for name in ds.file_names]
            per_image = np.diff(np.concatenate([[0], np.cumsum(keep)])[ds.offsets])
            counts.append(per_image)
            parts.append((ds, keep, remap[ds.labels[keep]] if keep.any()
                          else np.zeros(0, np.int64)))
            sources.append(np.full(len(ds), s, np.int64))
        self.files = tuple(files)
        self.source_ids = np.concatenate(sources)
        self.image_ids = np.concatenate([ds.image_ids for ds in self.datasets])
        self.heights = np.concatenate([ds.heights for ds in self.datasets])
        self.widths = np.concatenate([ds.widths for ds in self.datasets])
        self.offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(
            np.int64)
        self.boxes = np.concatenate([ds.boxes[k] for ds, k, _ in parts]).reshape(-1, 4)
        self.box_labels = np.concatenate([lab for *_, lab in parts]).astype(np.int64)
        self.iscrowd = np.concatenate([ds.iscrowd[k] for ds, k, _ in parts])
        self.ann_ids = np.concatenate([ds.ann_ids[k] for ds, k, _ in parts])
        self.segmentations = tuple(seg for ds, k, _ in parts
                                   for seg, kept in zip(ds.segmentations, k, strict=True)
                                   if kept)
        self.labels = self._image_labels()

    def _stat_files(self) -> None:
        sizes, mtimes = [], []
        for i, path in enumerate(self.files):
            try:
                st = os.stat(path)
            except OSError as exc:
                ds = self.datasets[int(self.source_ids[i])]
                raise FormatError(ds.path, f"image {int(self.image_ids[i])}.file_name",
                                  f"{path} cannot be read ({exc.strerror or exc})") from exc
            sizes.append(st.st_size)
            mtimes.append(st.st_mtime_ns)
        self.sizes = np.asarray(sizes, np.int64)
        self.mtimes_ns = np.asarray(mtimes, np.int64)

    def annotation_file(self, index: int) -> str:
        """The COCO file sample `index` comes from."""
        return self.datasets[int(self.source_ids[index])].path

    def listing_digest(self) -> str:
        """Image names, sizes and mtimes, plus each annotation file's sha256."""
        extra = "".join(ds.content_sha256 for ds in self.datasets).encode()
        return listing_digest(self.files, self.roots, self.source_ids, self.sizes,
                              self.mtimes_ns, extra=extra)

    def _bytes(self, index: int) -> np.ndarray:
        path, size = self.files[index], int(self.sizes[index])
        return read_file_bytes(path) if self.store is None else \
            self.store.read_range(path, 0, size, (size, int(self.mtimes_ns[index])))


def warn_empty_masks(source: AnnotatedImages, option: str) -> None:
    """One warning naming each annotation file with annotations whose segmentation is
    empty, and their count, when `option` (e.g. "masks=True") makes masks of them."""
    counts = source.empty_segmentations()
    if not counts:
        return
    files = sorted(counts)
    named = ", ".join(f"{f} ({counts[f]})" for f in files[:3])
    if len(files) > 3:
        named += f" and {len(files) - 3} more files ({sum(counts[f] for f in files[3:])})"
    warnings.warn(f"{named}: {sum(counts.values())} annotation(s) have an empty "
                  f"segmentation ([], no polygon); with {option} their masks are all zeros",
                  stacklevel=3)


def holds_coco(data) -> bool:
    """Whether the folder `data` holds the detection loader's default annotation file."""
    return DEFAULT_ANNOTATIONS in names_in(data)


__all__ = ["CocoDataset", "DEFAULT_ANNOTATIONS", "DetectionSource", "annotation_path",
           "holds_coco", "warn_empty_masks"]
