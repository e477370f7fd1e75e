"""Videos that are objects in a store (`s3://.../class/video.mp4`) or members of tar shards:
probed once each, then read clip by clip with byte ranges.

Each video is an `ObjectBytes` (`dali_pipes.stores.object_file`): (URL, base offset, size)
in a store whose `read_range` applies its retries, timeouts and block cache. The first use of
a video probes it (`probe_file`): the container's header and index are read and kept in
memory for later opens; for MP4 only the index is read (the packets' bytes are skipped), for
Matroska/WebM/AVI (whose index lists keyframes only) every packet is demuxed once. A clip
then opens the video again (its header from memory), seeks to the keyframe at or before the
clip and reads the packets up to the clip's last frame: with PyAV to decode them
(`decode_frames_pyav`), or to copy them into the small segment DALI's decoder takes
(`remux_segment`). So a clip fetches the byte ranges of its packets plus read-ahead (64 KiB
chunks), not the file.

Probes (and kept headers) are held per process in bounded LRU maps (forked loader workers
probe on their own first use, as for local files).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.video import (
    PROBE_CACHE_SIZE,
    VideoInfo,
    decode_frames_pyav,
    probe_file,
    remux_segment,
)
from dali_pipes.stores.object_file import ObjectBytes

KEPT_OBJECTS = 32  # videos whose header stays in memory


class StoreVideos:
    """Videos `names[i]` at bytes `bases[i]..bases[i] + sizes[i]` of `urls[i]` in `store`
    (`versions`: of whole objects, as listed; None for members of shards)."""

    def __init__(self, store, names: Sequence[str], urls: Sequence[str], bases, sizes,
                 versions=None):
        self.store, self.names, self.urls = store, list(names), list(urls)
        self.bases = np.asarray(bases, np.int64)
        self.sizes = np.asarray(sizes, np.int64)
        self.versions = None if versions is None else np.asarray(versions, np.int64)
        self._infos: OrderedDict[int, VideoInfo] = OrderedDict()
        self._objects: OrderedDict[int, ObjectBytes] = OrderedDict()
        self.fetched = self.requests = 0  # of objects no longer held, plus held ones: stats()

    def __getstate__(self) -> dict:  # workers start with empty caches
        return {**self.__dict__, "_infos": OrderedDict(), "_objects": OrderedDict()}

    def object(self, video: int) -> ObjectBytes:
        """The bytes of video `video` (its kept header shared by every open)."""
        obj = self._objects.get(video)
        if obj is None:
            if self.sizes[video] <= 0:
                raise FormatError(self.names[video], "file", "is empty",
                                  expected="a video file")
            size = int(self.sizes[video])
            listed = None if self.versions is None else (size, int(self.versions[video]))
            obj = ObjectBytes(self.store, self.urls[video], size, base=int(self.bases[video]),
                              stat=listed)
            self._objects[video] = obj
            if len(self._objects) > KEPT_OBJECTS:
                _, old = self._objects.popitem(last=False)
                self.fetched, self.requests = self.fetched + old.fetched, \
                    self.requests + old.requests
        self._objects.move_to_end(video)
        return obj

    def info(self, video: int) -> VideoInfo:
        """The probe of video `video` (once per process; FormatError names the video)."""
        info = self._infos.get(video)
        if info is None:
            obj = self.object(video)
            info = probe_file(self.names[video], lambda: obj.open(keep=True))
            self._infos[video] = info
            if len(self._infos) > PROBE_CACHE_SIZE:
                self._infos.popitem(last=False)
        self._infos.move_to_end(video)
        return info

    def segment(self, video: int, frames: np.ndarray) -> tuple[np.ndarray, int]:
        """(segment bytes, clip start in it) for DALI: `remux_segment` over range reads."""
        obj = self.object(video)
        segment, key = remux_segment(self.info(video), int(frames[0]), int(frames.max()),
                                     opener=obj.open)
        return segment, int(frames[0]) - key

    def decode(self, video: int, frames: np.ndarray, **decode) -> np.ndarray:
        """(T, H, W, 3) uint8 RGB frames decoded with PyAV over range reads; `decode`:
        `decode_frames_pyav`'s scale and threads."""
        obj = self.object(video)
        return decode_frames_pyav(self.names[video], frames, info=self.info(video),
                                  opener=obj.open, **decode)[0]

    def stats(self) -> tuple[int, int]:
        """(bytes, requests) asked of the store for these videos in this process."""
        held = list(self._objects.values())
        return (self.fetched + sum(o.fetched for o in held),
                self.requests + sum(o.requests for o in held))
