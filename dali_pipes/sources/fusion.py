"""Fusion source: class folders of video files, each with a sibling `<stem>.imu.csv`.

Sample i is clip i of `VideoFolderSource` (the video half, local or behind URLs); its IMU
stream is read once per file (`read_imu`, cached per process) and resampled at the clip's
frame timestamps with `align_to_frames` (sensor time = frame time + `imu_offset`). numpy only.

Channel names must agree across files: the headers of every IMU file present are read when
the source is made (one line each) and a mismatch raises ValueError naming the files. A missing
or malformed IMU file is not an error here: it fails its own samples when they are read, so
the loader's `on_error` policy applies to it.
"""
from __future__ import annotations

import os
import stat

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.imu import TIME_COLUMN, ImuStream, imu_path_for, parse_imu, read_imu
from dali_pipes.geometry.align import METHODS, Method, align_to_frames
from dali_pipes.sources.folders import PathLike, listing_digest, names_in
from dali_pipes.sources.remote_folders import Objects
from dali_pipes.sources.video import VideoFolderSource
from dali_pipes.stores import Store

IMU_METHODS = METHODS


def _stat_or_missing(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def _header_channels(path: str) -> tuple[str, ...] | None:
    """Channel names from the header line, or None when the file is missing or unreadable
    (that file then fails per sample, with read_imu's full diagnosis)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block open()
            return None
        with open(path, encoding="utf-8-sig") as f:
            names = tuple(cell.strip() for cell in f.readline().split(","))
    except (OSError, UnicodeDecodeError):
        return None
    if len(names) < 2 or names[0] != TIME_COLUMN:
        return None
    return names[1:]


def check_options(imu_offset, imu_method, max_gap) -> tuple[float, Method, float | None]:
    """Validated (offset, method, max_gap); ValueError naming the option otherwise."""
    if isinstance(imu_offset, bool) or not isinstance(imu_offset, (int, float, np.number)) \
            or not np.isfinite(imu_offset):
        raise ValueError(f"imu_offset must be a finite number of seconds, got {imu_offset!r}")
    if imu_method not in IMU_METHODS:
        raise ValueError(f"imu_method must be one of {IMU_METHODS}, got {imu_method!r}")
    if max_gap is not None and (isinstance(max_gap, bool)
                                or not isinstance(max_gap, (int, float, np.number))
                                or not max_gap > 0):
        raise ValueError(f"max_gap must be None or a positive number of seconds, "
                         f"got {max_gap!r}")
    method = next(m for m in IMU_METHODS if m == imu_method)  # the checked name, as a Method
    return float(imu_offset), method, None if max_gap is None else float(max_gap)


class ImuChannels:
    """The IMU half every fusion source shares: options, streams read once per file and
    aligned at a clip's frame timestamps. Subclasses say where a sample's IMU file is
    (`imu_path`), how to read it (`_read_stream`) and which channels the data set has
    (`_agreed_channels`)."""

    channels: tuple[str, ...]
    labels: np.ndarray  # from the clip source this is mixed into: one per sample
    views_per_video: int

    def _set_imu(self, imu_offset, imu_method, max_gap) -> None:
        self.imu_offset, self.imu_method, self.max_gap = check_options(
            imu_offset, imu_method, max_gap)
        self._streams: dict[str, ImuStream] = {}
        self.channels = self._agreed_channels()

    def imu_path(self, index: int) -> str:
        raise NotImplementedError

    def _read_stream(self, index: int) -> ImuStream:
        raise NotImplementedError

    def _agreed_channels(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _first_readable_channels(self, missing: str) -> tuple[str, ...]:
        """The channels of the first IMU stream that reads (one per video), kept for the
        samples that use it; ValueError saying `missing` when none does. For stores where
        reading every IMU file at listing would cost one request each."""
        for index in range(0, len(self.labels), self.views_per_video):
            try:
                stream = self._read_stream(index)
            except (FormatError, EOFError, OSError):
                continue
            self._streams[stream.path] = stream
            return stream.channels
        raise ValueError(f"fusion: {missing}")

    @property
    def num_channels(self) -> int:
        return len(self.channels)

    def stream(self, index: int) -> ImuStream:
        """Sample `index`'s IMU stream, read once per file (FormatError if bad)."""
        path = self.imu_path(index)
        stream = self._streams.get(path)
        if stream is None:
            stream = self._read_stream(index)
            if stream.channels != self.channels:
                raise ValueError(f"{path}: channels {list(stream.channels)} differ from the "
                                 f"data set's {list(self.channels)}")
            self._streams[path] = stream
        return stream

    def imu(self, index: int, timestamps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, D) float32 IMU at the frames' timestamps + offset, and (T,) bool validity."""
        stream = self.stream(index)
        values, valid = align_to_frames(timestamps, stream.t, stream.values,
                                        method=self.imu_method, max_gap=self.max_gap,
                                        offset=self.imu_offset)
        return values.astype(np.float32), np.asarray(valid, dtype=bool)


class FusionFolderSource(ImuChannels, VideoFolderSource):
    """`root/<class>/<video>` + `root/<class>/<stem>.imu.csv` (or a list of roots; behind
    URLs too: the `<stem>.imu.csv` object beside each video, from the same listing, read
    whole through the store once per process)."""

    def __init__(self, data: PathLike | list[PathLike], *, clip_length: int = 8,
                 stride: int = 1, clips_per_video: int = 1, crops: int = 1,
                 imu_offset: float = 0.0, imu_method: str = "linear",
                 max_gap: float | None = None, store: Store | None = None,
                 objects: list[Objects] | None = None):
        super().__init__(data, clip_length=clip_length, stride=stride,
                         clips_per_video=clips_per_video, crops=crops, store=store,
                         objects=objects)
        self._listed = {url: (size, version) for found in self.objects
                        for url, size, version in found}
        self._set_imu(imu_offset, imu_method, max_gap)

    def listing_digest(self) -> str:
        """The videos' digest (names, sizes, mtimes) with each IMU file's size and
        modification time (behind URLs: version; -1, -1 for a missing one) joined to its
        stat hash."""
        stats = np.array([self._imu_stat(self._imu_of(v)) for v in self.files],
                         dtype=np.int64).reshape(-1, 2)
        listing = self.listing
        return listing_digest(listing.files, listing.roots, listing.source_ids,
                              listing.sizes, listing.mtimes_ns, extra=stats.tobytes())

    def _imu_of(self, video: str) -> str:
        if self.store is not None:
            return video.rsplit("/", 1)[0] + "/" + imu_path_for(video).name
        return os.fspath(imu_path_for(video))

    def _imu_stat(self, path: str) -> tuple[int, int]:
        return self._listed.get(path, (-1, -1)) if self.store is not None \
            else _stat_or_missing(path)

    def imu_path(self, index: int) -> str:
        return self._imu_of(self.path(index))

    def _read_stream(self, index: int) -> ImuStream:
        path = self.imu_path(index)
        if self.store is None:
            return read_imu(path)
        if path not in self._listed:
            raise FormatError(path, "file", "no such object (not in the listing)",
                              expected="a <stem>.imu.csv beside the video")
        size, version = self._listed[path]
        data = self.store.read_range(path, 0, size, (size, version))
        return parse_imu(path, data.tobytes())

    def _agreed_channels(self) -> tuple[str, ...]:
        """The channel names every readable IMU header shares (ValueError naming files;
        behind URLs: the first IMU object's, the others checked when read)."""
        if self.store is not None:
            return self._first_remote_channels()
        found: dict[tuple[str, ...], list[str]] = {}
        for video in self.files:
            imu = os.fspath(imu_path_for(video))
            channels = _header_channels(imu)
            if channels is not None:
                found.setdefault(channels, []).append(imu)
        if not found:
            raise ValueError(f"fusion: no readable <stem>.imu.csv beside any of the "
                             f"{len(self.files)} video files under {self.roots}")
        if len(found) > 1:
            parts = "; ".join(f"{list(ch)} in {', '.join(files[:3])}"
                              + (f" and {len(files) - 3} more" if len(files) > 3 else "")
                              for ch, files in found.items())
            raise ValueError(f"fusion: IMU files disagree on their channels: {parts}")
        return next(iter(found))

    def _first_remote_channels(self) -> tuple[str, ...]:
        return self._first_readable_channels(
            f"no readable <stem>.imu.csv beside any of the {len(self.files)} video files "
            f"under {self.roots}")


def holds_imu(data) -> bool:
    """Whether the class folders of `data` hold IMU streams beside their clips."""
    return any(n.endswith(".imu.csv") for n in names_in(data, 1))
