"""What the pack tool writes for each modality: a sample's shard members, and the writer.

Layouts (keys the zero-padded sample index in SRC's listing, members in this order):
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
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.pack._owned import marked

Member = tuple[str, "bytes | str"]  # (extension, bytes or a file to copy)
_PACKERS: dict[str, Callable] = {}


def _packer(name: str):
    """Register the packer of `--modality name`."""
    def register(make: Callable) -> Callable:
        _PACKERS[name] = make
        return make
    return register


class MemberPacker:
    """A source's samples as shard members: `classes`, `labels`, `class_counts`,
    `listing_digest()`, `sizes` (bytes per sample), `members(i)` and `extra_files`."""

    def __init__(self, modality: str, files, labels, classes, digest: str,
                 members, extra_files: dict[str, bytes] | None = None, class_counts=None):
        self.modality, self.files, self.classes = modality, tuple(files), tuple(classes)
        self.labels = np.asarray(labels, np.int64)
        self._digest, self._members = digest, members
        self.extra_files = dict(extra_files or {})
        self.class_counts = (np.bincount(self.labels, minlength=len(self.classes))
                             if class_counts is None else np.asarray(class_counts)).tolist()
        self.sizes = np.asarray([sum(len(d) if isinstance(d, bytes) else os.path.getsize(d)
                                     for _, d in self.members(i))
                                 for i in range(len(self.files))], np.int64)

    def __len__(self) -> int:
        return len(self.files)

    def listing_digest(self) -> str:
        return self._digest

    def members(self, index: int) -> list[Member]:
        """(extension, bytes or path) of sample `index`'s members, in order."""
        return self._members(index)


def member_packer(src, modality: str) -> MemberPacker:
    """The packer of `src` for `modality` (ValueError for hyperspectral: see the doc)."""
    if modality == "hyperspectral":
        raise ValueError("hyperspectral scenes are not packed into shards: ENVI and SPE cubes "
                         "stay files, read patch by patch in byte ranges; upload the scenes "
                         "folder as it is (e.g. to s3://bucket/scenes/) and load that URL")
    return _PACKERS[modality](src)


def _cls(label) -> Member:
    return "cls", str(int(label)).encode()


@_packer("video")
def _video(src) -> MemberPacker:
    from dali_pipes.sources.video import VideoFolderSource
    s = VideoFolderSource(src)
    return MemberPacker("video", s.files, s.labels, s.classes, s.listing_digest(),
                        lambda i: [(_ext(s.files[i]), s.files[i]), _cls(s.labels[i])])


@_packer("fusion")
def _fusion(src) -> MemberPacker:
    from dali_pipes.sources.fusion import FusionFolderSource
    s = FusionFolderSource(src)
    return MemberPacker("fusion", s.files, s.labels, s.classes, s.listing_digest(),
                        lambda i: [(_ext(s.files[i]), s.files[i]), ("imu.csv", s.imu_path(i)),
                                   _cls(s.labels[i])])


@_packer("frames")
def _frames(src) -> MemberPacker:
    from dali_pipes.sources.video_frames import FrameFolderSource
    s = FrameFolderSource(src)

    def members(i: int) -> list[Member]:
        folder = Path(s.files[i])
        names = sorted(e.name for e in os.scandir(folder)
                       if e.is_file() and not e.name.startswith("."))
        return [(name, str(folder / name)) for name in names] + [_cls(s.labels[i])]
    return MemberPacker("frames", s.files, s.labels, s.classes, s.listing_digest(), members)


@_packer("detection")
def _detection(src) -> MemberPacker:
    from dali_pipes.sources.detection import DetectionSource
    s = DetectionSource(src, crowd="keep")
    _check_inside(s.datasets[0])
    doc = json.loads(Path(s.datasets[0].path).read_bytes())
    by_image: dict[int, list] = defaultdict(list)
    for ann in doc["annotations"]:
        by_image[ann["image_id"]].append(ann)

    def members(i: int) -> list[Member]:
        iid = int(s.image_ids[i])
        anns = sorted(by_image[iid], key=lambda a: a["id"])
        record = {"image_id": iid, "height": int(s.heights[i]), "width": int(s.widths[i]),
                  "annotations": [{k: v for k, v in a.items() if k != "image_id"}
                                  for a in anns]}
        return [(_ext(s.files[i]), s.files[i]),
                ("json", json.dumps(record, sort_keys=True, separators=(",", ":")).encode())]
    counts = np.bincount(s.box_labels, minlength=len(s.classes))
    categories = json.dumps(marked({"categories": doc["categories"]}), sort_keys=True,
                            indent=1).encode() + b"\n"
    return MemberPacker("detection", s.files, s.labels, s.classes, s.listing_digest(),
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


# What `--modality` takes: class folders of images, the packers above, and hyperspectral
# scenes (refused with the reason).
MODALITIES = ("image", *_PACKERS, "hyperspectral")


def _ext(path: str) -> str:
    return Path(path).suffix.lower().lstrip(".")
