"""Video (and fusion) source over WebDataset tar shards, local or behind URLs.

Samples are `<key>.<mp4|webm|mkv|avi>` with `<key>.cls` (an integer) or `<key>.json`
(`{"label": int}`), and for fusion `<key>.imu.csv`; sample i is clip i % K of video i // K,
in member order across the shards, as `VideoFolderSource` over a folder. The shards are
listed once (`shard_members.list_shard`: tar headers only); each video member is a byte
range of its shard, probed once and read clip by clip through the store
(`video_store.StoreVideos`). A sample without a video member or label, or with a malformed
label, fails when read (FormatError naming the shard, the member and the field), so
`on_error` applies to it.
"""
from __future__ import annotations

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.imu import ImuStream, parse_imu
from dali_pipes.formats.video import VideoInfo
from dali_pipes.sources.fusion import ImuChannels
from dali_pipes.sources.shard_manifest import manifest_classes
from dali_pipes.sources.shard_members import ShardSample, list_shards, samples_digest
from dali_pipes.sources.shard_names import flatten, shard_sources
from dali_pipes.sources.shards import shard_parent
from dali_pipes.sources.video import VideoClips
from dali_pipes.sources.video_store import StoreVideos
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store

VIDEO_EXTS = ("mp4", "webm", "mkv", "avi")
IMU_EXT = "imu.csv"


class VideoShardSource(VideoClips):
    """Video members of WebDataset shards (`data` as for image shards: a `.tar` path or URL,
    a brace pattern, a list, or folders of shards, one source each)."""

    def __init__(self, data, *, clip_length: int = 8, stride: int = 1,
                 clips_per_video: int = 1, crops: int = 1, store: Store | None = None):
        self._set_clip_options(clip_length, stride, clips_per_video, crops)
        self.store = store or open_store(data)
        sources = shard_sources(data, self.store)
        self.multi_source = len(sources) > 1
        self.shards = tuple(flatten(sources))
        self.roots = tuple(shard_parent(s[0], self.store) for s in sources)
        listing = list_shards(sources, self.store)
        self.samples, source_ids = listing.samples, listing.source_ids
        self.ignored, self.truncated = listing.ignored, listing.truncated
        labels = np.array([s.label for s in self.samples], np.int64)
        names, bases, sizes = [], [], []
        for sample in self.samples:
            video = sample.member(VIDEO_EXTS)
            names.append(f"{sample.shard}:{video[0] if video else sample.key}")
            bases.append(video[1] if video else 0)
            sizes.append(video[2] if video else 0)
        self.videos = StoreVideos(self.store, names, [s.shard for s in self.samples],
                                  bases, sizes)
        self.classes = manifest_classes(self.roots, labels, self.store) or tuple(
            str(c) for c in np.unique(labels[labels >= 0]))
        self._set_listing(tuple(names), labels, source_ids)

    def listing_digest(self) -> str:
        """Shard names (not folders), member names and sizes of every sample."""
        return f"{len(self.samples)} videos in {len(self.shards)} shards, " \
               f"sha256 {samples_digest(self.shards, self.samples)}"

    def check(self, index: int) -> ShardSample:
        """Sample `index`'s shard sample; FormatError for no video member or a bad label."""
        sample = self.samples[int(index) // self.views_per_video]
        if sample.member(VIDEO_EXTS) is None:
            raise FormatError(sample.shard, f"sample {sample.key}", "no video member",
                              expected="<key>." + "/.".join(VIDEO_EXTS))
        sample.check_label()
        return sample

    def info(self, index: int) -> VideoInfo:
        """The probe of sample `index`'s video member (once per process)."""
        self.check(index)
        return self.videos.info(int(index) // self.views_per_video)

    def frame_count(self, index: int) -> int:
        return self.info(index).frame_count

    def timestamps(self, index: int, frames: np.ndarray) -> np.ndarray:
        return np.array(self.info(index).timestamps[frames], dtype=np.float64)

    def _segment(self, index: int, frames: np.ndarray) -> tuple[np.ndarray, int]:
        self.info(index)
        return self.videos.segment(int(index) // self.views_per_video, frames)

    def _decode(self, index: int, frames: np.ndarray, **decode) -> np.ndarray:
        self.info(index)
        return self.videos.decode(int(index) // self.views_per_video, frames, **decode)

    def fetched(self) -> tuple[int, int]:
        """(bytes, requests) read for the videos in this process (the listing not counted)."""
        return self.videos.stats()


class FusionShardSource(ImuChannels, VideoShardSource):
    """Video shards whose samples also hold `<key>.imu.csv` (fusion): the IMU member is read
    once per process (one range read) and validated as a local IMU file; the channels are
    the first readable member's, the others checked when read."""

    def __init__(self, data, *, clip_length: int = 8, stride: int = 1,
                 clips_per_video: int = 1, crops: int = 1, imu_offset: float = 0.0,
                 imu_method: str = "linear", max_gap: float | None = None,
                 store: Store | None = None):
        super().__init__(data, clip_length=clip_length, stride=stride,
                         clips_per_video=clips_per_video, crops=crops, store=store)
        self._set_imu(imu_offset, imu_method, max_gap)

    def imu_path(self, index: int) -> str:
        sample = self.samples[int(index) // self.views_per_video]
        member = sample.members.get(IMU_EXT)
        return f"{sample.shard}:{member[0] if member else sample.key + '.' + IMU_EXT}"

    def _read_stream(self, index: int) -> ImuStream:
        sample = self.check(index)
        member = sample.members.get(IMU_EXT)
        if member is None:
            raise FormatError(sample.shard, f"sample {sample.key}", "no IMU member",
                              expected=f"<key>.{IMU_EXT}")
        data = self.store.read_range(sample.shard, member[1], member[2])
        return parse_imu(self.imu_path(index), data.tobytes())

    def _agreed_channels(self) -> tuple[str, ...]:
        return self._first_readable_channels(
            f"no readable <key>.{IMU_EXT} member in {len(self.shards)} shard(s) under "
            f"{self.roots}")
