"""Frame folders behind URLs (`s3://bucket/train/<class>/<clip>/frame_%06d.jpg` +
`timestamps.npy`) and in WebDataset tar shards (what `python -m dali_pipes.pack --modality
frames` writes: per sample `<key>.frame_%06d.jpg` for every frame, `<key>.timestamps.npy` and
`<key>.cls` or `<key>.json`).

Both give the same samples, in the same order, as `FrameFolderSource` over the local tree
(classes sorted, clip folders sorted within each; the pack tool keys samples by their
position in that listing), so a seed gives the same clips. Every frame and the timestamps
are separate objects or members: a clip reads the timestamps once (per process) and then
exactly its frames, each one range read through the store (its retries, timeouts, version
checks and block cache). A sample whose timestamps or frame is missing, or whose label is
malformed, fails when read (FormatError naming the object or shard and member), so
`on_error` applies to it.
"""
from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.folders import is_hidden
from dali_pipes.sources.frames import TIMESTAMPS, frame_name
from dali_pipes.sources.image import check_max_pixels
from dali_pipes.sources.remote_folders import Objects
from dali_pipes.sources.shard_manifest import manifest_classes
from dali_pipes.sources.shard_members import ShardSample, list_shards, samples_digest
from dali_pipes.sources.shard_names import flatten, shard_sources
from dali_pipes.sources.shards import shard_parent
from dali_pipes.sources.video_frames import FrameClips, checked_timestamps
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store, store_paths

FRAME_MEMBER = re.compile(r"^frame_(\d{6,})\.jpg$")


class Member(NamedTuple):
    """Where one file of a frame folder lies: `size` bytes from `offset` of `url` (an
    object of a listing, with its `version`; or a shard, version None)."""

    name: str  # for errors: the object's URL, or "<shard>:<member>"
    url: str
    offset: int
    size: int
    version: int | None = None


class StoredFrameSource(FrameClips):
    """The frame-folder source over members of a store (subclasses list them)."""

    def _set_folders(self, store, names, stamps: Sequence[Member | None],
                     frames: Sequence[dict[int, Member]], max_pixels) -> None:
        self.store, self.max_pixels = store, check_max_pixels(max_pixels)
        self._stamps, self._frames = stamps, frames
        self._names = list(names)
        self._timestamps: dict[int, np.ndarray] = {}

    def __getstate__(self) -> dict:  # workers read the timestamps on their own first use
        return {**self.__dict__, "_timestamps": {}}

    def _read(self, member: Member) -> np.ndarray:
        listed = None if member.version is None else (member.size, member.version)
        return self.store.read_range(member.url, member.offset, member.size, listed)

    def _check(self, folder: int) -> None:
        """Subclasses: FormatError for a sample that cannot be read (e.g. its label)."""

    def all_timestamps(self, index: int) -> np.ndarray:
        """(n,) float64 timestamps of every frame of sample `index`'s folder."""
        folder = int(index) // self.views_per_video
        if folder not in self._timestamps:
            self._check(folder)
            member = self._stamps[folder]
            if member is None:
                raise FormatError(self._names[folder], TIMESTAMPS, "missing",
                                  expected="the frame folder's timestamps (1-D float64)")
            try:
                ts = np.load(io.BytesIO(self._read(member).tobytes()), allow_pickle=False)
            except ValueError as exc:
                raise FormatError(member.name, "npy header", f"unreadable ({exc})") from exc
            self._timestamps[folder] = checked_timestamps(ts, member.name)
        return self._timestamps[folder]

    def frame_path(self, index: int, frame: int) -> str:
        """The name of sample `index`'s frame `frame` (an object URL or a shard member)."""
        member = self._frames[int(index) // self.views_per_video].get(int(frame))
        return member.name if member else f"{self.path(index)}/{frame_name(int(frame))}"

    def _frame(self, index: int, frame: int) -> tuple[np.ndarray, str]:
        member = self._frames[int(index) // self.views_per_video].get(int(frame))
        if member is None:
            raise FormatError(self.frame_path(index, frame), "file", "missing",
                              expected=f"frame {frame} of {self.path(index)}")
        return self._read(member), member.name


class RemoteFrameFolderSource(StoredFrameSource):
    """Class folders of frame folders in a listable store other than local files (URLs of
    `s3://...`, a store handed in: one listing call per root; `objects`: that listing when
    already made). Clip folders are the sub-folders of the class folders that hold
    `timestamps.npy`; the others are reported in `ignored`."""

    def __init__(self, data, *, store: Store, clip_length: int = 8, stride: int = 1,
                 clips_per_video: int = 1, crops: int = 1, objects: list[Objects] | None = None,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self._set_clip_options(clip_length, stride, clips_per_video, crops)
        roots = store_paths(data, store)
        if not roots:
            raise ValueError(f"{data!r}: local frame folders are read by FrameFolderSource")
        objects = objects or [store.list(r) for r in roots]
        self.roots = tuple(r.rstrip("/") for r in roots)
        per_root = [_clip_folders(root, found) for root, found in
                    zip(self.roots, objects, strict=True)]
        self.classes = tuple(sorted({c for classes, _ in per_root for c in classes}))
        class_id = {c: i for i, c in enumerate(self.classes)}
        files, labels, sources, stamps, frames = [], [], [], [], []
        ignored = []
        for source, (root, (_, clips)) in enumerate(zip(self.roots, per_root, strict=True)):
            for (cls, clip), members in sorted(clips.items()):
                folder = f"{root}/{cls}/{clip}"
                if TIMESTAMPS not in members:
                    ignored.append(folder)
                    continue
                files.append(folder)
                labels.append(class_id[cls])
                sources.append(source)
                stamps.append(members[TIMESTAMPS])
                frames.append(_numbered(members))
        if not files:
            raise ValueError(f"{list(self.roots)}: no frame folders "
                             f"(expected <class>/<clip>/{TIMESTAMPS})")
        self.ignored = tuple(ignored)
        self._set_listing(files, labels, sources)
        self._set_folders(store, files, stamps, frames, max_pixels)

    def listing_digest(self) -> str:
        """Folder names (relative to their root) with the size and version of each
        folder's timestamps.npy."""
        digest = hashlib.sha256()
        for folder, source, stamp in zip(self.files, self.source_ids[::self.views_per_video],
                                         self._stamps, strict=True):
            rel = folder[len(self.roots[source]) + 1:]
            size, version = (stamp.size, stamp.version) if stamp else (0, 0)
            digest.update(f"{source}\0{rel}\0{size}\0{version}\0".encode())
        return f"{len(self.files)} frame folders, sha256 {digest.hexdigest()}"


def _clip_folders(root: str, objects: Objects
                  ) -> tuple[set[str], dict[tuple[str, str], dict[str, Member]]]:
    """(class folders, {(class, clip): {file name: Member}}) of the objects under `root`:
    visible `<class>/<clip>/<file>` objects (deeper ones are not walked)."""
    classes: set[str] = set()
    clips: dict[tuple[str, str], dict[str, Member]] = {}
    prefix = root + "/"
    for url, size, version in objects:
        if not url.startswith(prefix) or url.endswith("/"):
            continue
        parts = url[len(prefix):].split("/")
        if len(parts) < 2 or any(map(is_hidden, parts)):
            continue
        classes.add(parts[0])
        if len(parts) == 3:
            clips.setdefault((parts[0], parts[1]), {})[parts[2]] = \
                Member(url, url, 0, int(size), int(version))
    return classes, clips


def _numbered(members: dict[str, Member]) -> dict[int, Member]:
    """{frame number: member} of the `frame_%06d.jpg` files among `members`."""
    found = {}
    for name, member in members.items():
        match = FRAME_MEMBER.match(name)
        if match:
            found[int(match.group(1))] = member
    return found


class FrameShardSource(StoredFrameSource):
    """Frame folders packed into WebDataset shards (`data` as for video shards). Each
    sample's members are listed from the tar headers; labels come from `<key>.cls` or
    `<key>.json`, class names from the pack manifest beside the shards."""

    def __init__(self, data, *, clip_length: int = 8, stride: int = 1,
                 clips_per_video: int = 1, crops: int = 1, store: Store | None = None,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self._set_clip_options(clip_length, stride, clips_per_video, crops)
        store = store or open_store(data)
        sources = shard_sources(data, store)
        self.multi_source = len(sources) > 1
        self.shards = tuple(flatten(sources))
        self.roots = tuple(shard_parent(s[0], store) for s in sources)
        listing = list_shards(sources, store)
        self.samples, source_ids = listing.samples, listing.source_ids
        self.ignored, self.truncated = listing.ignored, listing.truncated
        labels = np.array([s.label for s in self.samples], np.int64)
        names = [f"{s.shard}:{s.key}" for s in self.samples]
        stamps = [_member(s, TIMESTAMPS) for s in self.samples]
        frames = [{k: _at(s, s.members[e]) for k, e in _frame_exts(s)} for s in self.samples]
        self.classes = manifest_classes(self.roots, labels, store) or tuple(
            str(c) for c in np.unique(labels[labels >= 0]))
        self._set_listing(names, labels, source_ids)
        self._set_folders(store, names, stamps, frames, max_pixels)

    def _check(self, folder: int) -> None:
        self.samples[folder].check_label()

    def listing_digest(self) -> str:
        """Shard names (not folders), member names and sizes of every sample."""
        return f"{len(self.samples)} frame folders in {len(self.shards)} shards, " \
               f"sha256 {samples_digest(self.shards, self.samples)}"


def _frame_exts(sample: ShardSample) -> list[tuple[int, str]]:
    return [(int(m.group(1)), ext) for ext in sample.members
            if (m := FRAME_MEMBER.match(ext))]


def _member(sample: ShardSample, ext: str) -> Member | None:
    found = sample.members.get(ext)
    return None if found is None else _at(sample, found)


def _at(sample: ShardSample, found: tuple[str, int, int]) -> Member:
    name, offset, size = found
    return Member(f"{sample.shard}:{name}", sample.shard, offset, size)
