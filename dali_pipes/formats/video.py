"""Video files probed and decoded with PyAV (FFmpeg): the index of frames every path shares.

`probe_video(path)` returns a `VideoInfo`: codec, container, size, frame count, frame rate and
the presentation timestamp of every frame. Rules:

- Frames are the video stream's packets in presentation order (sorted by pts), as FFmpeg's
  demuxer gives them and as DALI's `fn.decoders.video` indexes them, so frame `i` here is
  `start_frame=i` there. Probing demuxes packets without decoding (pts and keyframe flags);
  it reads the file's bytes once (cost per frame measured in docs/measurements.md).
- `frame_count` is counted from those packets; the container's header count (`stream.frames`,
  0 in Matroska/WebM, sometimes wrong elsewhere) is never trusted. Empty (flush) packets are
  not frames; packets the demuxer flags corrupt (the cut-off last packet of a truncated file)
  are dropped and counted in `dropped_packets`. Only when a packet has no pts (raw H.264
  streams) or two packets share a pts does probing decode the whole stream and count decoded
  frames (`indexed_by == "decode"`); such files are then decoded from the start on every read.
- `timestamps` are seconds from the first presented frame (the first is 0.0), computed
  exactly from pts and the stream's time base; `start_time` is that first frame's time on the
  stream clock. `fps` is the container's average rate when it agrees (1%) with the timestamps,
  else (n - 1) / (last - first) from the timestamps (variable frame rate), else 0.0.
- A truncated file gives the frames whose packets are complete, when the container can still
  be opened (WebM, MKV, AVI); when the part needed to open it is gone (an MP4 whose `moov`
  index sits at the end) probing raises `FormatError` on `container`.
- Missing or empty file, a container FFmpeg cannot open, no video stream, zero frames:
  `FormatError` naming the file and the field (`file`, `container`, `video_stream`,
  `frame_count`, `packets`).
- Results are cached in-process (`functools.lru_cache`, 4096 entries) keyed by
  (absolute path, mtime in ns, size), so a rewritten file is probed again; the arrays in a
  `VideoInfo` are read-only because the cache shares them. `clear_probe_cache()` empties it.

`decode_frames_pyav(path, frame_indices)` seeks to the keyframe at or before the first
requested frame and decodes forward only until the last requested frame: the CPU fallback for
codecs DALI cannot decode on its CPU backend and the reference decoder of the torch path.
With `scale` the frames leave swscale at the output size (no full-size RGB); H.264/HEVC frames
the clip does not use and no other frame refers to are not decoded; `threads` sizes FFmpeg's
decoder threads (`decoder_threads`). Measured in docs/measurements.md ("Video scaled in the
decoder").

DALI's CPU `fn.decoders.video` works here with per-sample start_frame / sequence_length / stride
from `external_source`, with our frame numbering; its YUV->RGB chroma upsampling differs from
swscale's at sharp colour edges, so comparisons need a mean-based tolerance. On in-memory input
its cost grows with the start frame (it decodes every frame before the clip); feeding it instead
the packets from the keyframe before the clip to the clip's end, remuxed with PyAV into a small
in-memory Matroska file (`remux_segment`, no decoding), makes its cost independent of the file's
length. decode_frames_pyav seeks, so its cost depends on the clip and the keyframe interval
only. Measured in docs/measurements.md ("dali_pipes/formats/video.py").
"""
from __future__ import annotations

import functools
import io
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import BinaryIO, Literal

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from dali_pipes.formats.errors import FormatError

Opener = Callable[[], io.RawIOBase | BinaryIO]  # a new seekable binary file per call
CPU_DECODABLE_CODECS = frozenset({"vp8", "vp9", "mjpeg"})
SKIP_NONREF_CODECS = frozenset({"h264", "hevc"})  # decoders honouring skip_frame per packet
# swscale flags of scaled decoding: SWS_BILINEAR (its filter widens when shrinking, so it
# antialiases like torchvision's resize) | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP (chroma
# at full horizontal resolution: without them each pair of output pixels shares one chroma
# sample, 3 grey levels off on average and 27 at the 99th percentile instead of 1.2 and 3)
SWS_SCALE_FLAGS = 0x2 | 0x2000 | 0x4000
PROBE_CACHE_SIZE = 4096
_FPS_AGREEMENT = 0.01


@dataclass(frozen=True, eq=False)
class VideoInfo:
    """What `probe_video` learned about a file's first video stream (arrays are read-only)."""

    path: str
    codec: str
    container: str
    stream_index: int
    width: int
    height: int
    frame_count: int
    fps: float
    time_base: Fraction
    start_time: float
    pts: np.ndarray          # (frame_count,) int64, stream time base, presentation order
    timestamps: np.ndarray   # (frame_count,) float64 seconds, timestamps[0] == 0.0
    keyframes: np.ndarray    # (K,) int64 frame indices of keyframes, ascending
    indexed_by: Literal["packets", "decode"]
    dropped_packets: int = 0
    profile: str | None = None     # FFmpeg's profile name ("High", "Profile 0", "Main 10")
    pix_fmt: str | None = None     # FFmpeg's pixel format ("yuv420p", "yuv422p10le")
    chroma: str | None = None      # "420", "422", "444", "400" (gray), "other"; None: unknown
    bit_depth: int | None = None   # bits per luma sample; None: unknown

    @property
    def cpu_decodable(self) -> bool:
        """DALI's CPU backend decodes this codec (VP8, VP9, MJPEG)."""
        return self.codec in CPU_DECODABLE_CODECS

    def keyframe_at_or_before(self, index: int) -> int:
        """The last keyframe index <= `index` (0 when none is flagged before it)."""
        pos = int(np.searchsorted(self.keyframes, index, side="right")) - 1
        return int(self.keyframes[pos]) if pos >= 0 else 0


def probe_video(path: str | os.PathLike) -> VideoInfo:
    """Probe (or fetch from the cache) the first video stream of `path`."""
    path = os.path.abspath(os.fspath(path))
    try:
        st = os.stat(path)
    except OSError as exc:
        raise FormatError(path, "file", f"cannot be read: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        what = "is empty" if stat.S_ISREG(st.st_mode) else "is not a regular file"
        raise FormatError(path, "file", what, expected="a video file")
    return _probe_cached(path, st.st_mtime_ns, st.st_size)


def clear_probe_cache() -> None:
    """Forget every cached probe (files are re-probed on next use)."""
    _probe_cached.cache_clear()


@functools.lru_cache(maxsize=PROBE_CACHE_SIZE)
def _probe_cached(path: str, mtime_ns: int, size: int) -> VideoInfo:
    return probe_file(path, None)


def probe_file(name: str, opener: Opener | None) -> VideoInfo:
    """Probe the first video stream of the file `opener()` returns (a seekable binary file
    object; None: the local file `name`), named `name` in the result and in errors. Not
    cached: the caller keeps the result (e.g. a source over a store, per object).

    When the file object has `skip_ranges(starts, ends)` and the container's index locates
    every packet (MP4/MOV: FFmpeg reads the whole sample table when it opens the file), the
    packets' bytes are not read: they are handed to `skip_ranges` (the file then serves
    zeros there, nothing fetched), pts come from demuxing the index and keyframe flags from
    the index's sync-sample entries. So probing a remote MP4 reads its header and index only.
    """
    file = None if opener is None else opener()
    with _open(name, None if file is None else lambda: file) as container:
        stream = _video_stream(name, container)
        key_positions = _skip_sample_data(file, container, stream)
        pts, keys, dropped = _demux_index(name, container, stream, key_positions)
        if pts is not None:
            return _make_info(name, container, stream, pts, keys, "packets", dropped)
    with _open(name, opener) as container:
        stream = _video_stream(name, container)
        pts, keys = _decode_index(name, container, stream)
        return _make_info(name, container, stream, pts, keys, "decode", dropped)


def _skip_sample_data(file, container, stream) -> frozenset[int] | None:
    """The byte positions of the keyframes the index lists, after handing the index's
    sample ranges to `file.skip_ranges` (None, and empty ranges handed, where the container
    has no such index: Matroska/WebM/AVI list keyframes only; None for a local path)."""
    skip = getattr(file, "skip_ranges", None)
    if skip is None:
        return None
    entries = [e for s in container.streams for e in s.index_entries]
    if "mp4" not in container.format.name.split(",") or not stream.index_entries \
            or any(e.pos < 0 or e.size <= 0 for e in entries):
        skip(np.zeros(0, np.int64), np.zeros(0, np.int64))
        return None
    skip(np.array([e.pos for e in entries], np.int64),
         np.array([e.pos + e.size for e in entries], np.int64))
    return frozenset(int(e.pos) for e in stream.index_entries if e.is_keyframe)


def _open(path: str, opener: Opener | None = None):
    """The container of `path` (or of the file `opener()` returns). A file object's own
    errors (a store's failed read, naming the object and its status) pass unchanged."""
    try:
        return av.open(path if opener is None else opener(), metadata_errors="ignore")
    except (av.error.FFmpegError, OSError) as exc:
        if opener is not None and not isinstance(exc, av.error.FFmpegError):
            raise
        raise FormatError(path, "container", f"FFmpeg cannot open it: {exc}") from exc


def _video_stream(path: str, container):
    if not container.streams.video:
        kinds = [s.type for s in container.streams]
        raise FormatError(path, "video_stream", "the file has no video stream", value=kinds,
                          expected="at least one video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None or stream.width <= 0 or stream.height <= 0:
        raise FormatError(path, "video_stream", "no decodable size or codec",
                          value=(stream.width, stream.height))
    return stream


def _demux_index(path: str, container, stream, key_positions=None):
    """(pts, keyframe flags, dropped) from packets; pts None when packets cannot index frames.
    `key_positions`: keyframes are the packets at these byte positions (else the packets'
    own flags)."""
    pts, keys, dropped = [], [], 0
    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            if packet.is_corrupt:
                dropped += 1
                continue
            pts.append(packet.pts)
            keys.append(packet.is_keyframe if key_positions is None
                        else packet.pos in key_positions)
    except av.error.FFmpegError as exc:
        raise FormatError(path, "packets", f"demuxing failed after {len(pts)} packets: "
                                           f"{exc}") from exc
    if any(p is None for p in pts):
        return None, None, dropped
    stamps = np.asarray(pts, dtype=np.int64)
    order = np.argsort(stamps, kind="stable")
    stamps, flags = stamps[order], np.asarray(keys, dtype=bool)[order]
    if np.any(np.diff(stamps) == 0):
        return None, None, dropped
    return stamps, flags, dropped


def _decode_index(path: str, container, stream):
    """(pts, keyframe flags) by decoding every frame; missing pts become index / rate."""
    pts, keys = [], []
    try:
        for frame in container.decode(stream):
            pts.append(frame.pts)
            keys.append(bool(frame.key_frame))
    except av.error.FFmpegError as exc:
        raise FormatError(path, "frames", f"decoding failed after {len(pts)} frames: "
                                          f"{exc}") from exc
    if pts and any(p is None for p in pts):
        rate = stream.average_rate or stream.guessed_rate
        if not rate or stream.time_base is None:
            raise FormatError(path, "timestamps", "frames carry no timestamps and the "
                                                  "stream has no frame rate")
        step = 1 / (Fraction(rate) * stream.time_base)
        pts = [round(i * step) for i in range(len(pts))]
    return np.asarray(pts, dtype=np.int64), np.asarray(keys, dtype=bool)


def _make_info(path, container, stream, pts, keys, indexed_by, dropped) -> VideoInfo:
    if len(pts) == 0:
        raise FormatError(path, "frame_count", "the video stream holds no frames", value=0,
                          expected=">= 1")
    tb = Fraction(stream.time_base) if stream.time_base else Fraction(1, 1)
    seconds = (pts - pts[0]).astype(np.float64) * tb.numerator / tb.denominator
    keyframes = np.flatnonzero(keys).astype(np.int64)
    for array in (pts, seconds, keyframes):
        array.flags.writeable = False
    chroma, bit_depth = chroma_and_depth(stream.codec_context.pix_fmt)
    return VideoInfo(path=path, codec=_codec_name(stream.codec_context),
                     container=container.format.name,
                     stream_index=stream.index, width=stream.width, height=stream.height,
                     frame_count=len(pts), fps=_fps(stream, seconds), time_base=tb,
                     start_time=float(int(pts[0]) * tb), pts=pts, timestamps=seconds,
                     keyframes=keyframes, indexed_by=indexed_by, dropped_packets=dropped,
                     profile=stream.codec_context.profile, pix_fmt=stream.codec_context.pix_fmt,
                     chroma=chroma, bit_depth=bit_depth)


def chroma_and_depth(pix_fmt: str | None) -> tuple[str | None, int | None]:
    """("420" | "422" | "444" | "400" | "other", bits per luma sample) of an FFmpeg pixel
    format name; (None, None) when it is unknown."""
    if pix_fmt is None:
        return None, None
    try:
        fmt = av.VideoFormat(pix_fmt, 64, 64)
    except (TypeError, ValueError):
        return None, None
    luma, *rest = fmt.components
    chroma = [c for c in rest if c.is_chroma]
    if not chroma:
        return ("400" if len(rest) <= 1 else "444"), luma.bits
    ratio = (luma.width // chroma[0].width, luma.height // chroma[0].height)
    return {(2, 2): "420", (2, 1): "422", (1, 1): "444"}.get(ratio, "other"), luma.bits


def _fps(stream, seconds: np.ndarray) -> float:
    measured = (len(seconds) - 1) / seconds[-1] if len(seconds) > 1 and seconds[-1] > 0 else 0.0
    declared = float(stream.average_rate) if stream.average_rate else 0.0
    if declared > 0 and (measured == 0 or abs(declared - measured) <= _FPS_AGREEMENT * declared):
        return declared
    return float(measured)


def decode_frames_pyav(path: str | os.PathLike, frame_indices, *,
                       info: VideoInfo | None = None, opener: Opener | None = None,
                       scale: tuple[int, int] | None = None, threads: int = 1,
                       skip_unused: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Frames (T, H, W, 3) uint8 RGB and their timestamps (T,) float64 for `frame_indices`.

    Indices may repeat and come in any order. Decoding starts at the keyframe at or before the
    smallest index and stops at the largest one. `info` skips the (cached) probe; `opener`
    (with `info`): reads the file from the object it returns instead of `path`.
    `scale`: (height, width) the frames leave the decoder at, scaled by swscale from YUV
    in the same step as the RGB conversion (`SWS_SCALE_FLAGS`);
    None: native size. `threads`: the decoder's threads (FFmpeg "AUTO" threading when > 1;
    `decoder_threads` sizes it to a process's share of the cores). `skip_unused`: H.264 and
    HEVC frames the clip does not use and no other frame refers to (non-reference pictures
    between a stride's frames or before the clip's first frame) are not decoded (FFmpeg's
    skip_frame "NONREF", set per packet); the frames returned are the same.
    """
    info = info if info is not None else probe_video(path)
    index = _check_indices(info, frame_indices)
    out_hw = (info.height, info.width) if scale is None else _check_scale(info, scale)
    if index.size == 0:
        return (np.zeros((0, *out_hw, 3), np.uint8), np.zeros(0, np.float64))
    wanted = np.unique(index)
    decode = functools.partial(_decode_wanted, info, wanted, opener=opener,
                               scale=None if scale is None else out_hw,
                               threads=_check_threads(threads),
                               skip=skip_unused and info.codec in SKIP_NONREF_CODECS)
    got = decode(seek=info.indexed_by == "packets")
    missing = [int(i) for i in wanted if int(i) not in got]
    if missing and info.indexed_by == "packets":
        # the seek landed after a keyframe
        got = decode(seek=False)
        missing = [int(i) for i in wanted if int(i) not in got]
    if missing:
        raise FormatError(info.path, "frames", "the decoder produced no frame for indices",
                          value=missing[:8], expected=f"frames in [0, {info.frame_count})")
    frames = np.stack([got[int(i)] for i in index])
    return frames, np.array(info.timestamps[index], dtype=np.float64)


def _check_indices(info: VideoInfo, frame_indices) -> np.ndarray:
    index = np.asarray(frame_indices)
    if index.ndim != 1 or (index.size and not np.issubdtype(index.dtype, np.integer)):
        raise ValueError(f"{info.path}: frame_indices must be a 1-D sequence of integers, got "
                         f"shape {index.shape} dtype {index.dtype}")
    index = index.astype(np.int64)
    bad = index[(index < 0) | (index >= info.frame_count)]
    if bad.size:
        raise IndexError(f"{info.path}: frame indices {bad[:8].tolist()} are outside "
                         f"[0, {info.frame_count})")
    return index


def _check_scale(info: VideoInfo, scale) -> tuple[int, int]:
    if (not isinstance(scale, (tuple, list)) or len(scale) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
                       for v in scale)):
        raise ValueError(f"{info.path}: scale must be a (height, width) pair of positive "
                         f"ints or None, got {scale!r}")
    return int(scale[0]), int(scale[1])


def _check_threads(threads) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    return int(threads)


def decoder_threads(cores: int, workers: int = 1) -> int:
    """Decoder threads of each of `workers` decoding processes sharing `cores` cores:
    cores // workers, at least 1 (so decoding never starts more threads than cores)."""
    return max(1, int(cores) // max(1, int(workers)))


def _frame_rgb(reformatter: VideoReformatter, frame: av.VideoFrame,
               scale: tuple[int, int] | None) -> np.ndarray:
    """One decoded frame as (H, W, 3) uint8 RGB, scaled by swscale when `scale` is given.
    One `reformatter` per clip keeps its swscale context (about 0.4 ms a frame saved
    against a new context per frame, as `frame.to_ndarray` makes); same pixels."""
    if scale is None:
        return reformatter.reformat(frame, format="rgb24").to_ndarray()
    return reformatter.reformat(frame, width=scale[1], height=scale[0], format="rgb24",
                                interpolation=SWS_SCALE_FLAGS).to_ndarray()


def _decode_wanted(info: VideoInfo, wanted: np.ndarray, *, seek: bool,
                   opener: Opener | None = None, scale: tuple[int, int] | None = None,
                   threads: int = 1, skip: bool = False) -> dict[int, np.ndarray]:
    """Decode from a keyframe (or the start) until every wanted frame is held; `skip`:
    unwanted non-reference frames are not decoded (needs frames indexed by packets)."""
    first, last, wanted_set, got = int(wanted[0]), int(wanted[-1]), set(wanted.tolist()), {}
    with _open(info.path, opener) as container:
        stream = container.streams[info.stream_index]
        stream.codec_context.thread_count = threads
        stream.codec_context.thread_type = "AUTO" if threads > 1 else "SLICE"
        key = info.keyframe_at_or_before(first) if seek else 0
        if key > 0:
            container.seek(int(info.pts[key]), stream=stream, backward=True)
        try:
            unwanted, reformatter = None, VideoReformatter()
            if skip and info.indexed_by == "packets":
                wanted_pts = frozenset(info.pts[wanted].tolist())
                unwanted = wanted_pts.__contains__
            for i, frame in _indexed_frames(info, container, stream, unwanted):
                if i in wanted_set:
                    got[i] = _frame_rgb(reformatter, frame, scale)
                if i >= last or len(got) == len(wanted_set):
                    break
        except av.error.FFmpegError as exc:
            raise FormatError(info.path, "frames", f"decoding frames {first}..{last} failed: "
                                                   f"{exc}") from exc
    return got


def _indexed_frames(info: VideoInfo, container, stream, wanted=None
                    ) -> Iterator[tuple[int, av.VideoFrame]]:
    """(frame index, frame) pairs: by pts when indexed by packets, else by decode order;
    `wanted(pts)`: see `_decoded_frames`."""
    for count, frame in enumerate(_decoded_frames(container, stream, wanted)):
        if info.indexed_by == "decode":
            yield count, frame
            continue
        if frame.pts is None:
            continue
        i = int(np.searchsorted(info.pts, frame.pts))
        if i < info.frame_count and info.pts[i] == frame.pts:
            yield i, frame


def _decoded_frames(container, stream, wanted=None) -> Iterator[av.VideoFrame]:
    """Every frame the decoder outputs from the current position (tests count these).
    `wanted(pts)` (None: every frame is): a packet whose pts it refuses is decoded with
    skip_frame "NONREF", so its frame is dropped unless others refer to it."""
    context = stream.codec_context
    for packet in container.demux(stream):
        if wanted is not None:
            unused = packet.size > 0 and packet.pts is not None and not wanted(packet.pts)
            context.skip_frame = "NONREF" if unused else "DEFAULT"
        yield from packet.decode()


def remux_segment(info: VideoInfo, first: int, last: int, *, opener: Opener | None = None
                  ) -> tuple[np.ndarray, int]:
    """A small in-memory Matroska file holding the packets from the keyframe at or before
    frame `first` through frame `last` (copied, never decoded), and that keyframe's index.

    Frame `first` is then frame `first - key` of the segment, so DALI's decoder only decodes
    from that keyframe instead of from the start of the file (its cost stops growing with the
    file's length; about 2 ms per clip). Packets that precede the keyframe in presentation
    order (open-GOP leading pictures) are left out. FormatError names the file on failure.
    `opener`: reads the file from the object it returns instead of `info.path`.
    """
    if not 0 <= first <= last < info.frame_count:
        raise IndexError(f"{info.path}: segment {first}..{last} is outside "
                         f"[0, {info.frame_count})")
    key = info.keyframe_at_or_before(first)
    out = io.BytesIO()
    try:
        with _open(info.path, opener) as src, av.open(out, "w", format="matroska") as dst:
            _copy_packets(info, src, dst, key, last)
    except av.error.FFmpegError as exc:
        raise FormatError(info.path, "packets", f"copying frames {key}..{last} into a "
                                                f"segment failed: {exc}") from exc
    return np.frombuffer(out.getvalue(), np.uint8), key


def _copy_packets(info: VideoInfo, src, dst, key: int, last: int) -> None:
    stream = src.streams[info.stream_index]
    target = dst.add_stream_from_template(stream)
    if key > 0:
        src.seek(int(info.pts[key]), stream=stream, backward=True)
    for packet in src.demux(stream):
        if packet.size == 0 or packet.pts is None or packet.pts < info.pts[key]:
            continue
        decode_ts = packet.dts if packet.dts is not None else packet.pts
        if decode_ts > info.pts[last]:
            break  # every frame up to `last` has been sent to the decoder
        packet.stream = target
        dst.mux(packet)


def _codec_name(context) -> str:
    """The stream's codec ("av1"), not the name of the decoder FFmpeg opened for it
    ("libdav1d")."""
    codec = getattr(context, "codec", None)
    return getattr(codec, "canonical_name", None) or context.name
