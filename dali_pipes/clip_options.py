"""The option groups of the clip modalities (video files, frame folders, fusion): what a
clip is, how video files are decoded, how the IMU is aligned (numpy only).

Each field is a `make_loader` keyword with its default; the modalities check the values
(`torch_bridge.modalities.video.ClipModality`, `dali_pipes.geometry.clip_crops`,
`dali_pipes.geometry.clips`).
"""
from __future__ import annotations

from dataclasses import dataclass

from dali_pipes.geometry.clip_crops import ClipResize
from dali_pipes.geometry.clips import LoaderPad


@dataclass(frozen=True)
class ClipOptions:
    """A clip: `clip_length` frames `stride` apart, `clips_per_video` per file and epoch,
    resized to `size` (int, (H, W), or None: native) by `resize` ("squash" or
    "short_side", with `short_side`), `train` (random start and flip) or not (centred),
    `pad` ("repeat_last" or "variable") past the end of a video, `views` (clips, crops)
    for multi-view evaluation."""

    clip_length: int = 8
    stride: int = 1
    size: int | tuple[int, int] | None = 224
    train: bool = True
    clips_per_video: int = 1
    pad: LoaderPad = "repeat_last"
    resize: ClipResize = "squash"
    short_side: int | None = None
    views: tuple[int, int] | None = None


@dataclass(frozen=True)
class VideoDecodeOptions:
    """PyAV decoding of video files: `scaled_decode` (frames leave the decoder scaled to
    the output) and `decode_threads` (FFmpeg threads per decoder; 0: this rank's share)."""

    scaled_decode: bool = True
    decode_threads: int = 0


@dataclass(frozen=True)
class ImuOptions:
    """The IMU of fusion samples: `imu_offset` (seconds; IMU time = frame time + offset),
    `imu_method` ("linear", "slerp", "previous", "nearest") and `max_gap` (seconds between
    the two samples around a frame beyond which it is not valid; None: no limit)."""

    imu_offset: float = 0.0
    imu_method: str = "linear"
    max_gap: float | None = None
