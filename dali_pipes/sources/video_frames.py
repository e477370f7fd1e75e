"""Frame-folder source: `root/<class>/<clip folder>/frame_%06d.jpg + timestamps.npy` (the
output of `python -m dali_pipes.frames extract`); sample i is clip i % K of folder i // K.

Numpy only. Folders are listed in the order `VideoFolderSource` lists their videos (classes
sorted, names sorted), so with the same seed the same index gets the same clip starts
(`clips.clip_starts`) and the same "repeat_last" padding as the video modality. Frame counts
come from `timestamps.npy` (read lazily, cached). Only folders holding `timestamps.npy` count.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dali_pipes.frames import TIMESTAMPS, frame_name
from dali_pipes.sources.clip_source import ClipSource
from dali_pipes.sources.folders import PathLike


def _class_dirs(root: Path) -> list[Path]:
    return sorted(e for e in root.iterdir() if e.is_dir() and not e.name.startswith("."))


def _clip_dirs(cls: Path) -> list[Path]:
    return sorted(e for e in cls.iterdir()
                  if e.is_dir() and not e.name.startswith(".") and (e / TIMESTAMPS).is_file())


def is_frame_folder_tree(path) -> bool:
    """True when `path` (or every folder of a list) holds class folders containing folders
    with `timestamps.npy`."""
    if isinstance(path, (list, tuple)):
        return bool(path) and all(is_frame_folder_tree(p) for p in path)
    try:
        root = Path(path)
        return root.is_dir() and any(_clip_dirs(c) for c in _class_dirs(root))
    except (OSError, TypeError):
        return False


class FrameFolderSource(ClipSource):
    """Class folders of per-frame JPEG folders (or a list of such roots, one per source)."""

    def __init__(self, data: PathLike | list[PathLike], *, clip_length: int = 8,
                 stride: int = 1, clips_per_video: int = 1):
        self._set_clip_options(clip_length, stride, clips_per_video)
        roots = [Path(data)] if isinstance(data, (str, os.PathLike)) else [Path(d) for d in data]
        if not roots:
            raise ValueError("data: expected a folder or a non-empty list of folders")
        per_root = []
        for root in roots:
            if not root.is_dir():
                raise FileNotFoundError(f"{root}: data folder does not exist")
            per_root.append([(c.name, _clip_dirs(c)) for c in _class_dirs(root)])
        classes = sorted({name for listing in per_root for name, _ in listing})
        class_id = {name: i for i, name in enumerate(classes)}
        files, labels, sources = [], [], []
        for source, listing in enumerate(per_root):
            found = [(name, d) for name, dirs in listing for d in dirs]
            if not found:
                raise ValueError(f"{roots[source]}: no frame folders "
                                 f"(expected <class>/<clip>/{TIMESTAMPS})")
            for name, d in found:
                files.append(str(d))
                labels.append(class_id[name])
                sources.append(source)
        self.roots, self.classes = tuple(map(str, roots)), tuple(classes)
        self._set_listing(files, labels, sources)
        self._timestamps: dict[int, np.ndarray] = {}

    def all_timestamps(self, index: int) -> np.ndarray:
        """(n,) float64 timestamps of every extracted frame of sample `index`'s folder."""
        folder = int(index) // self.clips_per_video
        if folder not in self._timestamps:
            path = os.path.join(self.files[folder], TIMESTAMPS)
            ts = np.load(path)
            if ts.ndim != 1 or len(ts) == 0:
                raise ValueError(f"{path}: expected a non-empty 1-D array, got {ts.shape}")
            self._timestamps[folder] = ts.astype(np.float64)
        return self._timestamps[folder]

    def frame_count(self, index: int) -> int:
        return len(self.all_timestamps(index))

    def timestamps(self, index: int, frames: np.ndarray) -> np.ndarray:
        return np.array(self.all_timestamps(index)[frames], dtype=np.float64)

    def read_jpegs(self, index: int, frames: np.ndarray) -> list[np.ndarray]:
        """The encoded bytes (uint8 (n,)) of each of the clip's frames, in clip order."""
        folder = self.path(index)
        out = []
        for k in np.asarray(frames).tolist():
            data = np.fromfile(os.path.join(folder, frame_name(int(k))), dtype=np.uint8)
            if data.size == 0:
                raise ValueError(f"{folder}/{frame_name(int(k))}: empty file")
            out.append(data)
        return out
