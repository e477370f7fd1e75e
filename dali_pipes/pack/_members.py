"""What the pack tool writes for each modality: a sample's shard members, read from SRC's store.

Layouts (keys the zero-padded sample index in SRC's listing, members in this order):
- image: `<key>.<image ext>` (the file as it is, or re-encoded with `--max-side`) +
  `<key>.cls`;
- video: `<key>.<mp4|webm|mkv|avi>` (the file as it is) + `<key>.cls`;
- fusion: the video, `<key>.imu.csv` (its IMU table as it is) + `<key>.cls`;
- frames: every file of the frame folder as `<key>.<file name>` (`<key>.frame_000000.jpg`,
  ..., `<key>.timestamps.npy`) + `<key>.cls`;
- detection (an images folder with its COCO file): `<key>.<image ext>` + `<key>.json`
  (`{"image_id", "height", "width", "annotations": [...]}`, the file's annotation objects
  as they are), and `categories.json` (`{"categories": [...]}`, the file's category table,
  with the tool's mark) beside the shards. A `file_name` that leaves the images folder (an
  absolute path or a `..` part) is refused: only files inside SRC are copied.
Hyperspectral scenes are not packed: an ENVI or SPE cube is one large object that patches
read in byte ranges, so cubes stay files (local or in object storage); a tar member would
only add a layer to every range.

SRC is any store (`dali_pipes.stores.select.resolve_store`): local files, a URL's folder
(listed once, `dali_pipes.sources.layout`), or a store handed in. The sources list it; a
member is then its bytes (labels, annotations) or a `Ref` (path, size, version) that a pack
worker reads whole through the store (`read_member`), checked against the listed version.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.pack._owned import marked
from dali_pipes.sources.layout import data_layout
from dali_pipes.stores import Store


class Ref(NamedTuple):
    """An object of SRC's store to copy whole: its path, and the size and version listed."""

    path: str
    size: int
    version: int


Member = tuple[str, bytes | Ref]  # (extension, bytes or an object to copy)
Objects = Sequence[tuple[str, int, int]]  # a store's listing: (path, size, version)
_PACKERS: dict[str, Callable] = {}


def read_member(store: Store, data: bytes | Ref) -> bytes:
    """A member's bytes: as they are, or the object read through `store` (an OSError naming
    it when it is gone or no longer the version listed)."""
    if isinstance(data, bytes):
        return data
    return store.read_range(data.path, 0, data.size, (data.size, data.version)).tobytes()


def _packer(name: str):
    """Register the packer of `--modality name`."""
    def register(make: Callable) -> Callable:
        _PACKERS[name] = make
        return make
    return register


class MemberPacker:
    """A source's samples as shard members: `classes`, `labels`, `class_counts`,
    `listing_digest()`, `sizes` (bytes per sample), `members(i)`, `extra_files` and the
    `store` its `Ref`s are read from."""

    def __init__(self, modality: str, store: Store, files, labels, classes, digest: str,
                 members, extra_files: dict[str, bytes] | None = None, class_counts=None):
        self.modality, self.store = modality, store
        self.files, self.classes = tuple(files), tuple(classes)
        self.labels = np.asarray(labels, np.int64)
        self._digest, self._members = digest, members
        self.extra_files = dict(extra_files or {})
        self.class_counts = (np.bincount(self.labels, minlength=len(self.classes))
                             if class_counts is None else np.asarray(class_counts)).tolist()
        self.sizes = np.asarray([sum(len(d) if isinstance(d, bytes) else d.size
                                     for _, d in self.members(i))
                                 for i in range(len(self.files))], np.int64)

    def __len__(self) -> int:
        return len(self.files)

    def listing_digest(self) -> str:
        return self._digest

    def members(self, index: int) -> list[Member]:
        """(extension, bytes or Ref) of sample `index`'s members, in order."""
        return self._members(index)


def member_packer(src, modality: str, store: Store) -> MemberPacker:
    """The packer of `src` (a path in `store`'s namespace) for `modality`; ValueError for
    hyperspectral (see the doc) and for a SRC of tar shards."""
    if modality == "hyperspectral":
        raise ValueError("hyperspectral scenes are not packed into shards: ENVI and SPE cubes "
                         "stay files, read patch by patch in byte ranges; upload the scenes "
                         "folder as it is (e.g. to s3://bucket/scenes/) and load that URL")
    layout = data_layout(os.fspath(src), store)
    if layout.shards:
        raise ValueError("names tar shards; the pack tool packs folders (class folders, "
                         "or images with their COCO file)")
    objects = None if layout.objects is None else layout.objects[0]
    return _PACKERS[modality](os.fspath(src), store, objects)


class _Listed:
    """(size, version) of SRC's objects: from the listing when there is one, else asked."""

    def __init__(self, store: Store, objects: Objects | None):
        self.store = store
        self.found = {p: (int(n), int(v)) for p, n, v in objects or ()}

    def ref(self, path: str) -> Ref:
        size, version = self.found.get(path) or self.store.stat(path)
        return Ref(path, int(size), int(version))


def _refs(files, sizes, versions) -> list[Ref]:
    return [Ref(f, int(n), int(v)) for f, n, v in zip(files, np.asarray(sizes).tolist(),
                                                       np.asarray(versions).tolist(),
                                                       strict=True)]


def _cls(label) -> Member:
    return "cls", str(int(label)).encode()


@_packer("image")
def _image(src: str, store: Store, objects: Objects | None) -> MemberPacker:
    from dali_pipes.sources.image import ImageFolderSource
    return _copied("image", ImageFolderSource(src, store=store, objects=_one(objects)), store)


@_packer("video")
def _video(src: str, store: Store, objects: Objects | None) -> MemberPacker:
    from dali_pipes.sources.video import VideoFolderSource
    return _copied("video", VideoFolderSource(src, store=store, objects=_one(objects)), store)


@_packer("fusion")
def _fusion(src: str, store: Store, objects: Objects | None) -> MemberPacker:
    from dali_pipes.sources.fusion import FusionFolderSource
    s = FusionFolderSource(src, store=store, objects=_one(objects))
    listed = _Listed(store, objects)
    imus = [listed.ref(s.imu_path(i)) for i in range(len(s.files))]
    return _copied("fusion", s, store, lambda i: [("imu.csv", imus[i])])


def _one(objects: Objects | None) -> list[Objects] | None:
    """A source's `objects` argument: the listing of its one root."""
    return None if objects is None else [objects]


def _copied(modality: str, s, store: Store, more: Callable | None = None) -> MemberPacker:
    """Each sample of a class-folder source `s`: its file as it is, `more(i)`, its class."""
    refs = _refs(s.files, s.listing.sizes, s.listing.mtimes_ns)
    return MemberPacker(modality, store, s.files, s.labels, s.classes, s.listing_digest(),
                        lambda i: [(_ext(s.files[i]), refs[i]), *(more(i) if more else ()),
                                   _cls(s.labels[i])])


@_packer("frames")
def _frames(src: str, store: Store, objects: Objects | None) -> MemberPacker:
    from dali_pipes.sources.frame_stores import RemoteFrameFolderSource
    from dali_pipes.sources.video_frames import FrameFolderSource
    s = FrameFolderSource(src) if objects is None else \
        RemoteFrameFolderSource(src, store=store, objects=_one(objects))
    in_folder = _by_folder(objects) if objects is not None else None

    def members(i: int) -> list[Member]:
        folder = s.files[i]
        found = in_folder.get(folder, []) if in_folder is not None else store.list(folder)
        prefix = folder.rstrip("/") + "/"
        files = sorted((p[len(prefix):], Ref(p, int(n), int(v))) for p, n, v in found
                       if p.startswith(prefix) and "/" not in p[len(prefix):]
                       and not p[len(prefix):].startswith("."))
        return [*files, _cls(s.labels[i])]
    return MemberPacker("frames", store, s.files, s.labels, s.classes, s.listing_digest(),
                        members)


def _by_folder(objects: Objects) -> dict[str, list[tuple[str, int, int]]]:
    """The listed objects grouped by the folder directly holding them."""
    out: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for path, size, version in objects:
        out[path.rsplit("/", 1)[0]].append((path, size, version))
    return out


@_packer("detection")
def _detection(src: str, store: Store, objects: Objects | None) -> MemberPacker:
    from dali_pipes.sources.detection import DetectionSource
    s = DetectionSource(src, crowd="keep", store=store)
    _check_inside(s.datasets[0])
    doc = json.loads(read_member(store, _Listed(store, objects).ref(s.datasets[0].path)))
    by_image: dict[int, list] = defaultdict(list)
    for ann in doc["annotations"]:
        by_image[ann["image_id"]].append(ann)
    refs = _refs(s.files, s.sizes, s.mtimes_ns)

    def members(i: int) -> list[Member]:
        iid = int(s.image_ids[i])
        anns = sorted(by_image[iid], key=lambda a: a["id"])
        record = {"image_id": iid, "height": int(s.heights[i]), "width": int(s.widths[i]),
                  "annotations": [{k: v for k, v in a.items() if k != "image_id"}
                                  for a in anns]}
        return [(_ext(s.files[i]), refs[i]),
                ("json", json.dumps(record, sort_keys=True, separators=(",", ":")).encode())]
    counts = np.bincount(s.box_labels, minlength=len(s.classes))
    categories = json.dumps(marked({"categories": doc["categories"]}), sort_keys=True,
                            indent=1).encode() + b"\n"
    return MemberPacker("detection", store, s.files, s.labels, s.classes, s.listing_digest(),
                        members, {"categories.json": categories}, class_counts=counts)


def _check_inside(dataset) -> None:
    """FormatError for a COCO `file_name` outside the images folder (absolute, or with a
    `..` part): the pack tool copies files from inside SRC only."""
    for image_id, name in zip(dataset.image_ids.tolist(), dataset.file_names, strict=True):
        if os.path.isabs(name) or ".." in Path(name).parts:
            raise FormatError(dataset.path, f"image {image_id}.file_name",
                              "names a file outside SRC (an absolute path or a '..' part); "
                              "the pack tool copies only files inside SRC: copy the image "
                              "into SRC and name it relative to SRC", value=name)


# What `--modality` takes: the packers above, and hyperspectral scenes (refused with the
# reason).
MODALITIES = (*_PACKERS, "hyperspectral")


def _ext(path: str) -> str:
    return Path(path).suffix.lower().lstrip(".")
