"""Video source: class folders of video files; sample i is clip i % K of video i // K.

Files are probed lazily (on first use of a sample, through `probe_video`'s in-process cache),
so making a source over thousands of files costs a directory listing only. Clip starts come
from `dali_pipes.geometry.clips` (pure functions of seed, epoch, video index and clip number); the
frame indices of a clip follow its "repeat_last" padding rule (a video shorter than the clip
repeats its last frame, and the timestamps repeat with it).

For DALI a clip is read as an encoded segment (`read(i, ClipRead(frames))`, `remux_segment`:
the packets from the keyframe before the clip to its last frame, in a small Matroska file)
plus the clip's first frame within that segment; for codecs DALI cannot decode on the chosen
device the clip is decoded here with PyAV (`read(i, DecodedClipRead(frames, ...))`).

The roots may be in a listable store other than local files (URLs such as
`s3://bucket/train/`, or a store handed in): listed with one call per root
(`list_remote_class_folders`), each video probed once and read clip by clip with byte ranges
through the store (`dali_pipes.sources.video_store`).
"""
from __future__ import annotations

from typing import overload

import numpy as np

from dali_pipes.formats.video import VideoInfo, decode_frames_pyav, probe_video, remux_segment
from dali_pipes.sources.clip_source import ClipSource
from dali_pipes.sources.folders import PathLike, list_class_folders
from dali_pipes.sources.protocol import ClipRead, DecodedClipRead, EncodedClip, VideoSource
from dali_pipes.sources.remote_folders import Objects, list_remote_class_folders
from dali_pipes.sources.video_store import StoreVideos
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store, store_paths

VIDEO_EXTENSIONS = frozenset({".mp4", ".webm", ".mkv", ".avi"})


class VideoClips(ClipSource, VideoSource):
    """`read` (`VideoSource`) for every video source: the subclass's `_segment` and
    `_decode` of a clip's frames."""

    @overload
    def read(self, index: int, request: ClipRead | None = None) -> EncodedClip: ...

    @overload
    def read(self, index: int, request: DecodedClipRead) -> np.ndarray: ...

    def read(self, index: int, request: ClipRead | DecodedClipRead | None = None
             ) -> EncodedClip | np.ndarray:
        """(segment bytes uint8 (n,), clip start within the segment) for DALI's decoder;
        with `DecodedClipRead`, (T, H, W, 3) uint8 RGB frames decoded with PyAV (the CPU
        fallback). FormatError for a bad file."""
        frames = self._requested(index, None if request is None else request.frames)
        if isinstance(request, DecodedClipRead):
            return self._decode(index, frames, scale=request.scale, threads=request.threads)
        return EncodedClip(*self._segment(index, frames))

    def _segment(self, index: int, frames: np.ndarray) -> tuple[np.ndarray, int]:
        raise NotImplementedError

    def _decode(self, index: int, frames: np.ndarray, **decode) -> np.ndarray:
        """`decode`: `decode_frames_pyav`'s scale and threads."""
        raise NotImplementedError


class VideoFolderSource(VideoClips):
    """`root/<class>/<video>` (or a list of such roots, one per source).

    Roots in a store other than local files (`store`; default: local files, or an
    FsspecStore without cache for URLs) are listed and read through it; `objects`: their
    listing when it was already made (`dali_pipes.sources.layout`).
    """

    def __init__(self, data: PathLike | list[PathLike], *, clip_length: int = 8,
                 stride: int = 1, clips_per_video: int = 1, crops: int = 1,
                 store: Store | None = None, objects: list[Objects] | None = None):
        self._set_clip_options(clip_length, stride, clips_per_video, crops)
        store = store or open_store(data)
        roots = store_paths(data, store)
        self.store = store if roots else None  # None: local files, read directly
        self.objects: list[Objects] = []
        self.videos: StoreVideos | None = None
        if self.store is not None:
            self.objects = objects or [self.store.list(r) for r in roots]
            self.listing = list_remote_class_folders(roots, self.objects, VIDEO_EXTENSIONS,
                                                     "video", recursive=False)
            files = list(self.listing.files)
            self.videos = StoreVideos(self.store, files, files, np.zeros(len(files)),
                                      self.listing.sizes, self.listing.mtimes_ns)
        else:
            self.listing = list_class_folders(data, VIDEO_EXTENSIONS, "video")
        listing = self.listing
        self.roots, self.classes, self.ignored = listing.roots, listing.classes, listing.ignored
        self._set_listing(listing.files, listing.labels, listing.source_ids)

    def listing_digest(self) -> str:
        """Names (relative to their root), sizes and modification times (behind URLs: the
        objects' versions) of every video."""
        return self.listing.digest()

    def info(self, index: int) -> VideoInfo:
        """The probe of sample `index`'s file (cached; FormatError for a bad file)."""
        if self.videos is not None:
            return self.videos.info(int(index) // self.views_per_video)
        return probe_video(self.path(index))

    def frame_count(self, index: int) -> int:
        return self.info(index).frame_count

    def timestamps(self, index: int, frames: np.ndarray) -> np.ndarray:
        """(T,) float64 seconds from the file's first frame, for the clip's frames."""
        return np.array(self.info(index).timestamps[frames], dtype=np.float64)

    def _segment(self, index: int, frames: np.ndarray) -> tuple[np.ndarray, int]:
        if self.videos is not None:
            self.info(index)  # checks the sample first
            return self.videos.segment(int(index) // self.views_per_video, frames)
        info = self.info(index)
        segment, key = remux_segment(info, int(frames[0]), int(frames.max()))
        return segment, int(frames[0]) - key

    def _decode(self, index: int, frames: np.ndarray, **decode) -> np.ndarray:
        if self.videos is not None:
            self.info(index)
            return self.videos.decode(int(index) // self.views_per_video, frames, **decode)
        return decode_frames_pyav(self.path(index), frames, info=self.info(index), **decode)[0]

    def fetched(self) -> tuple[int, int]:
        """(bytes, requests) read from the store in this process ((0, 0) for local files)."""
        return self.videos.stats() if self.videos is not None else (0, 0)
