"""The Source seam: what every source answers, whatever its modality or store.

A source is an index-addressable listing (`len()`, a label and a source id per sample, the
sample's file, object or shard member for messages, a digest of the listing that resume
compares) with one read: `read(index, request=None)`. What a read returns depends on the
kind of data the source holds, named by `data_kind`; each kind is a small protocol below,
with its request (a small frozen value; None: the kind's default) and its result:

    kind      protocol       request (default)                     result
    "image"   ImageSource    ImageRead(check=True) (or STORED)     EncodedImage(data, size)
    "video"   VideoSource    ClipRead(frames=None)                 EncodedClip(data, start)
                             DecodedClipRead(frames, scale, ...)   (T, H, W, 3) uint8 frames
    "frames"  FrameSource    ClipRead(frames=None)                 EncodedFrames(data, sizes)
    "patch"   PatchSource    None                                  (n_bands, P, P) array
    "window"  WindowSource   WindowRead(start=None)                (n, channels) array

Modalities, tools and the source conformance suite (`dali_pipes.testing.source_tests`)
call `read` only. A bad sample raises (FormatError, OSError, EOFError naming its file), so
the loader's `on_error` applies to it. Optional members have their defaults here: a class
that subclasses a protocol inherits them. numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol, overload, runtime_checkable

import numpy as np


@runtime_checkable
class Source(Protocol):
    """An index-addressable listing of samples with one read (numpy only, picklable)."""

    # Sources of named classes also have `classes`, the names in label order (label maps
    # of hyperspectral scenes have none; `Loader.classes` says so).
    labels: np.ndarray  # int64, one per sample
    source_ids: np.ndarray  # int64, one per sample: the position of its folder in `data`
    data_kind: ClassVar[str]  # "image", "video", "frames", "patch" or "window" (see above)

    def __len__(self) -> int:
        """Samples in the listing."""
        ...

    def path(self, index: int) -> str:
        """The file, object or shard member of sample `index`, for messages."""
        ...

    def listing_digest(self) -> str:
        """A digest of what the listing holds (names, sizes, versions): a resumed loader
        refuses a listing whose digest changed."""
        ...

    def read(self, index: int, request: Any = None) -> Any:
        """Sample `index` as the source's kind declares it (`request`: that kind's request,
        None for its default)."""
        ...

    def close(self) -> None:
        """Release what the source holds open (memory maps, handles); default: nothing."""
        return None


# images ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageRead:
    """`check`: the bytes as the decoders take them, checked (header, JPEG scan structure,
    `max_pixels`; a GIF as its first frame in PNG); False: the stored bytes unchanged and
    unchecked (size None)."""

    check: bool = True


STORED = ImageRead(check=False)  # the request for a sample's stored bytes


class EncodedImage(NamedTuple):
    data: np.ndarray  # uint8 (n,): the encoded image
    size: tuple[int, int] | None  # (height, width) from its header; None when not checked


@runtime_checkable
class ImageSource(Source, Protocol):
    """Encoded images (class folders, shards, annotated images, Hugging Face rows)."""

    data_kind: ClassVar[str] = "image"

    def read(self, index: int, request: ImageRead | None = None) -> EncodedImage:
        ...


# clips ----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ClipRead:
    """The frames of a clip (T,) int64 frame indices, in clip order (indices may repeat);
    None: the sample's evaluation clip (`clip_frames(.., train=False)`: no seed in it)."""

    frames: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class DecodedClipRead:
    """A clip decoded to RGB on the CPU (PyAV), `scale` (height, width) in the decoder
    (None: native size), with `threads` decoder threads."""

    frames: np.ndarray | None = None
    scale: tuple[int, int] | None = None
    threads: int = 1


class EncodedClip(NamedTuple):
    data: np.ndarray  # uint8 (n,): the packets from the keyframe before the clip to its end
    start: int  # the clip's first frame within that segment


class EncodedFrames(NamedTuple):
    data: list[np.ndarray]  # uint8 (n,) per frame, in clip order: one JPEG each
    sizes: list[tuple[int, int]]  # (height, width) of each, from its checked header


@runtime_checkable
class VideoSource(Source, Protocol):
    """Clips of video files (fusion sources too: their IMU half is `imu(index, ts)`)."""

    data_kind: ClassVar[str] = "video"
    clip_length: int

    @overload
    def read(self, index: int, request: ClipRead | None = None) -> EncodedClip: ...

    @overload
    def read(self, index: int, request: DecodedClipRead) -> np.ndarray: ...

    def read(self, index: int, request: ClipRead | DecodedClipRead | None = None
             ) -> EncodedClip | np.ndarray:
        """An encoded segment for DALI's decoder, or (DecodedClipRead) the (T, H, W, 3)
        uint8 RGB frames."""
        ...


@runtime_checkable
class FrameSource(Source, Protocol):
    """Clips of frame folders: one JPEG per frame, each checked like an image file."""

    data_kind: ClassVar[str] = "frames"
    clip_length: int

    def read(self, index: int, request: ClipRead | None = None) -> EncodedFrames:
        ...


# arrays ---------------------------------------------------------------------------------
@runtime_checkable
class PatchSource(Source, Protocol):
    """Patches of hyperspectral scenes: (n_bands, patch_size, patch_size) in `dtype`,
    centred on the sample's position, reflect-padded at the edges."""

    data_kind: ClassVar[str] = "patch"
    patch_size: int
    dtype: np.dtype

    @property
    def n_bands(self) -> int:
        """Bands of each patch (the selected ones)."""
        ...

    def read(self, index: int, request: None = None) -> np.ndarray:
        ...


@dataclass(frozen=True)
class WindowRead:
    """The window's first row; None: the evaluation (centred) window."""

    start: int | None = None


@runtime_checkable
class WindowSource(Source, Protocol):
    """Windows of series: rows `start .. start + min(length, rows - start)` of the sample,
    (n, channels) in `dtype`."""

    data_kind: ClassVar[str] = "window"
    channels: int
    length: int
    dtype: np.dtype

    def read(self, index: int, request: WindowRead | None = None) -> np.ndarray:
        ...
