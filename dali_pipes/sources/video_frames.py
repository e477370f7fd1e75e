"""Frame-folder source: `root/<class>/<clip folder>/frame_%06d.jpg + timestamps.npy` (the
output of `python -m dali_pipes.frames extract`); sample i is clip i % K of folder i // K.

Numpy only. Folders are listed in the order `VideoFolderSource` lists their videos (classes
sorted, names sorted), so with the same seed the same index gets the same clip starts
(`clips.clip_starts`) and the same "repeat_last" padding as the video modality. Frame counts
come from `timestamps.npy` (read lazily, cached). Only folders holding `timestamps.npy` count.
"""
from __future__ import annotations

import os

import numpy as np

from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sources.clip_source import ClipSource
from dali_pipes.sources.folders import PathLike, is_sample, list_class_folders, listing_digest
from dali_pipes.sources.frames import TIMESTAMPS, frame_name
from dali_pipes.sources.image import check_max_pixels
from dali_pipes.sources.protocol import ClipRead, EncodedFrames, FrameSource


def _stat(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _is_clip_dir(entry: os.DirEntry) -> bool:
    return is_sample(entry, None) is None and os.path.isfile(os.path.join(entry.path,
                                                                         TIMESTAMPS))


def is_frame_folder_tree(path) -> bool:
    """True when `path` (or every folder of a list) holds class folders containing folders
    with `timestamps.npy` (sample folders as `folders.is_sample` sees them)."""
    if isinstance(path, (list, tuple)):
        return bool(path) and all(is_frame_folder_tree(p) for p in path)
    try:
        with os.scandir(path) as classes:
            dirs = [c.path for c in classes if is_sample(c, None) is None]
        for folder in dirs:
            with os.scandir(folder) as clips:
                if any(_is_clip_dir(e) for e in clips):
                    return True
    except (OSError, TypeError):
        return False
    return False


class FrameClips(ClipSource, FrameSource):
    """What every frame-folder source shares (local, object storage, shards): frame counts
    and clip timestamps from `all_timestamps(index)`, read once per folder, and `read`
    (`FrameSource`) from the subclass's `_frame(index, frame)`."""

    max_pixels: int | None

    def all_timestamps(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def frame_count(self, index: int) -> int:
        return len(self.all_timestamps(index))

    def timestamps(self, index: int, frames: np.ndarray) -> np.ndarray:
        return np.array(self.all_timestamps(index)[frames], dtype=np.float64)

    def read(self, index: int, request: ClipRead | None = None) -> EncodedFrames:
        """The encoded bytes (uint8 (n,)) of each of the clip's frames, in clip order, and
        each frame's (height, width) from its header (checked once, as the image source's
        files: header, scan structure, `max_pixels`); FormatError naming the frame file
        when one is not a sound JPEG. The folder's timestamps are read first."""
        frames = self._requested(index, None if request is None else request.frames)
        self.all_timestamps(index)
        out, sizes = [], []
        for k in frames.tolist():
            data, name = self._frame(index, k)
            sizes.append(jpeg_size(data, name, max_pixels=self.max_pixels))
            out.append(data)
        return EncodedFrames(out, sizes)

    def _frame(self, index: int, frame: int) -> tuple[np.ndarray, str]:
        """(bytes, name for messages) of sample `index`'s frame `frame`."""
        raise NotImplementedError


def checked_timestamps(ts: np.ndarray, where: str) -> np.ndarray:
    """A folder's timestamps as float64; ValueError naming `where` unless 1-D, not empty."""
    if ts.ndim != 1 or len(ts) == 0:
        raise ValueError(f"{where}: expected a non-empty 1-D array, got {ts.shape}")
    return ts.astype(np.float64)


class FrameFolderSource(FrameClips):
    """Class folders of per-frame JPEG folders (or a list of such roots, one per source).

    Frames are read without blocking on non-regular files and checked like the image
    source's files (`jpeg_size`: header, scan structure, `max_pixels`), so a bad frame fails
    its clip on both backends alike.
    """

    def __init__(self, data: PathLike | list[PathLike], *, clip_length: int = 8,
                 stride: int = 1, clips_per_video: int = 1, crops: int = 1,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self._set_clip_options(clip_length, stride, clips_per_video, crops)
        self.max_pixels = check_max_pixels(max_pixels)
        listing = list_class_folders(data, None, "frame folder")
        keep = np.array([os.path.isfile(os.path.join(f, TIMESTAMPS)) for f in listing.files])
        if not keep.any():
            raise ValueError(f"{listing.roots}: no frame folders "
                             f"(expected <class>/<clip>/{TIMESTAMPS})")
        files = [f for f, k in zip(listing.files, keep, strict=True) if k]
        stats = np.array([_stat(os.path.join(f, TIMESTAMPS)) for f in files], np.int64)
        self.roots, self.classes = listing.roots, listing.classes
        self.ignored = listing.ignored + tuple(
            f for f, k in zip(listing.files, keep, strict=True) if not k)
        self._set_listing(files, listing.labels[keep], listing.source_ids[keep])
        self._digest = listing_digest(files, self.roots, listing.source_ids[keep],
                                      stats[:, 0], stats[:, 1])
        self._timestamps: dict[int, np.ndarray] = {}

    def listing_digest(self) -> str:
        """Folder names (relative to their root) with the size and modification time of
        each folder's timestamps.npy."""
        return self._digest

    def all_timestamps(self, index: int) -> np.ndarray:
        """(n,) float64 timestamps of every extracted frame of sample `index`'s folder."""
        folder = int(index) // self.views_per_video
        if folder not in self._timestamps:
            path = os.path.join(self.files[folder], TIMESTAMPS)
            self._timestamps[folder] = checked_timestamps(np.load(path), path)
        return self._timestamps[folder]

    def frame_path(self, index: int, frame: int) -> str:
        """The file of sample `index`'s frame `frame`."""
        return os.path.join(self.path(index), frame_name(int(frame)))

    def _frame(self, index: int, frame: int) -> tuple[np.ndarray, str]:
        path = self.frame_path(index, frame)
        return read_file_bytes(path), path
