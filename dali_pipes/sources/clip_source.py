"""What every clip source shares: sample i is view i % V of video (or frame folder) i // V.

V = clips_per_video * crops: view v is temporal clip v // crops and spatial crop v % crops
(crops > 1 only for multi-view evaluation, `views=(clips, crops)`; otherwise V is the clips
per video and a view is a clip).

Subclasses list `files` (one per video), set `labels`/`source_ids` per video through
`_set_listing`, and say how many frames a video has (`frame_count`). Clip starts come from
`dali_pipes.geometry.clips` (pure functions of seed, epoch, video index and clip number) with its
"repeat_last" padding rule, so every clip source gives the same index the same clip;
`clip_frames(..., variable=True)` keeps only the frames the video has (loaders' pad="variable").
A read (`protocol.ClipRead`) names its frames; without them it reads the evaluation clip.
"""
from __future__ import annotations

import numpy as np

from dali_pipes.geometry.clips import clip_frame_indices, clip_lengths, clip_span, clip_starts
from dali_pipes.sources.names import PathTable
from dali_pipes.sources.protocol import Source

MAX_CLIP_OPTION = 1 << 16  # frames per clip, frame stride, clips or crops per video


class ClipSource(Source):
    def _set_clip_options(self, clip_length: int, stride: int, clips_per_video: int,
                          crops: int = 1) -> None:
        for name, value in (("clip_length", clip_length), ("stride", stride),
                            ("clips_per_video", clips_per_video), ("crops", crops)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
            if value > MAX_CLIP_OPTION:  # each clip (or view) is held in memory whole
                raise ValueError(f"{name}={value!r} is beyond the bound of {MAX_CLIP_OPTION} "
                                 f"this loader holds in memory per video")
        self.clip_length, self.stride = int(clip_length), int(stride)
        self.clips_per_video, self.crops = int(clips_per_video), int(crops)
        self.views_per_video = self.clips_per_video * self.crops

    def _set_listing(self, files, labels, source_ids) -> None:
        """One entry per video; labels and source ids are repeated per view. `files` is kept
        as given (a folder listing's numpy-backed `PathTable` stays compact; a list or tuple
        of str works as well)."""
        self.files = files if isinstance(files, (tuple, PathTable)) else tuple(files)
        self.labels = np.repeat(np.asarray(labels, np.int64), self.views_per_video)
        self.source_ids = np.repeat(np.asarray(source_ids, np.int64), self.views_per_video)

    def __len__(self) -> int:
        return len(self.files) * self.views_per_video

    def views(self, indices) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(video, view, crop) int64 (B,) of samples `indices`: the video's position in the
        listing, the view `clip * crops + crop` and the spatial crop."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        view = indices % self.views_per_video
        return indices // self.views_per_video, view, view % self.crops

    @property
    def span(self) -> int:
        return clip_span(self.clip_length, self.stride)

    def path(self, index: int) -> str:
        return self.files[int(index) // self.views_per_video]

    def frame_count(self, index: int) -> int:
        raise NotImplementedError

    def _requested(self, index: int, frames: np.ndarray | None) -> np.ndarray:
        """A read's frames as (T,) int64: `frames`, or (None) the sample's evaluation clip."""
        if frames is None:
            return self.clip_frames(0, 0, index, train=False)
        return np.asarray(frames, np.int64).reshape(-1)

    def clip_indices(self, seed: int, epoch: int, indices, *, train: bool) -> np.ndarray:
        """(B, clip_length) int64 frame indices of the samples' clips ("repeat_last")."""
        indices, starts, counts = self._starts(seed, epoch, indices, train)
        frames, _ = clip_frame_indices(starts, counts, self.clip_length, self.stride)
        return frames.reshape(len(indices), self.clip_length)

    def clip_frames(self, seed: int, epoch: int, index: int, *, train: bool,
                    variable: bool = False, key: int | None = None) -> np.ndarray:
        """(T,) int64 frame indices of sample `index`'s clip: `clip_length` of them padded
        with "repeat_last", or with `variable` only the L <= clip_length the video has.
        `key`: the plan's augmentation key of this draw of the sample (default: `index`)."""
        _, starts, counts = self._starts(seed, epoch, [index], train,
                                         None if key is None else [key])
        frames = clip_frame_indices(starts, counts, self.clip_length, self.stride)[0][0]
        if not variable:
            return frames
        return frames[:int(clip_lengths(starts, counts, self.clip_length, self.stride)[0])]

    def _starts(self, seed: int, epoch: int, indices, train: bool, keys=None):
        """(indices, clip starts, frame counts), each (B,) int64. The starts are drawn for
        `keys` (default: the indices); a key is index + draw * len(self), so
        key // views_per_video is the video's key and key % views_per_video // crops its
        clip."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        keys = indices if keys is None else np.asarray(keys, dtype=np.int64).reshape(-1)
        counts = np.array([self.frame_count(i) for i in indices.tolist()], np.int64)
        starts = clip_starts(seed, epoch, keys // self.views_per_video, counts,
                             clip_length=self.clip_length, stride=self.stride, train=train,
                             clips_per_video=self.clips_per_video,
                             clip_id=keys % self.views_per_video // self.crops)
        return indices, starts, counts
