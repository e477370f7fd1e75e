"""Built-in sample video clips: deterministic, tiny, VP9 so DALI's CPU decoder is exercised.

Each clip shows a coloured disc moving over a gradient background with a little noise; the
direction and colour depend on the class, so the classes are really different. Files are
encoded with PyAV (`libvpx-vp9` in WebM, or any codec PyAV can encode, for tests).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import av
import numpy as np

from dali_pipes.sample_data.sample_images import cache_root

CODEC_SUFFIX = {"libvpx-vp9": ".webm", "libvpx": ".webm", "mjpeg": ".avi", "libx264": ".mp4",
                "mpeg4": ".mp4"}


def synthetic_frames(rng: np.random.Generator, n_frames: int, width: int, height: int,
                     label: int = 0) -> np.ndarray:
    """(n_frames, height, width, 3) uint8: a disc moving over a drifting gradient."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    colour = np.array([(70 * label + 40) % 256, (130 + 50 * label) % 256, 200], np.float64)
    angle = 2 * np.pi * (label / 5 + rng.uniform(0, 0.1))
    cy, cx = rng.uniform(0.3, 0.7) * height, rng.uniform(0.3, 0.7) * width
    radius = min(width, height) / 5
    frames = np.empty((n_frames, height, width, 3), np.uint8)
    for i in range(n_frames):
        py = (cy + i * np.sin(angle)) % height
        px = (cx + i * np.cos(angle)) % width
        img = np.stack([(x * 2 + 3 * i) % 256, (y * 2 + 2 * i) % 256,
                        np.full_like(x, 64.0)], -1)
        img[(y - py) ** 2 + (x - px) ** 2 < radius ** 2] = colour
        frames[i] = (img + rng.integers(0, 8, img.shape)).clip(0, 255).astype(np.uint8)
    return frames


def write_video(path: Path, frames: np.ndarray, *, codec: str = "libvpx-vp9", fps: int = 25,
                gop: int = 12) -> Path:
    """Encode (T, H, W, 3) uint8 frames into `path` (container chosen by its suffix)."""
    options = {"deadline": "realtime", "cpu-used": "8"} if codec.startswith("libvpx") else {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps, options=options)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        stream.gop_size = gop
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


def small_video_folder(root: Path, *, n_videos: int = 6, n_classes: int = 3,
                       frames=(24, 40, 31), size=(64, 48), codec: str = "libvpx-vp9",
                       seed: int = 0) -> Path:
    """`root/class_k/vid_i<suffix>`: n_videos clips whose lengths cycle through `frames`."""
    rng = np.random.default_rng(seed)
    suffix = CODEC_SUFFIX.get(codec, ".mkv")
    for i in range(n_videos):
        label = i % n_classes
        pixels = synthetic_frames(rng, frames[i % len(frames)], size[0], size[1], label)
        write_video(root / f"class_{label}" / f"vid_{i:04d}{suffix}", pixels, codec=codec)
    return root


def video_dataset(*, n_videos: int = 48, n_classes: int = 4, size=(160, 120),
                  frames=(48, 64, 80, 96), root: Path | None = None, seed: int = 0,
                  codec: str = "libvpx-vp9", progress=None) -> Path:
    """Create (once) and return a folder of class folders of VP9 WebM clips (or of
    `codec`'s, e.g. "libx264" for H.264 MP4).

    The folder name encodes every parameter, so a changed request never reuses stale files.
    """
    params = (n_videos, n_classes, size, frames, seed, 1) + (
        () if codec == "libvpx-vp9" else (codec,))  # VP9 sets keep their cached names
    key = hashlib.sha1(repr(params).encode()).hexdigest()
    tag = "" if codec == "libvpx-vp9" else f"{codec}-"
    base = (root or cache_root()) / f"videos-{tag}{n_videos}x{size[0]}x{size[1]}-{key[:10]}"
    if (base / ".complete").exists():
        return base
    rng = np.random.default_rng(seed)
    for i in range(n_videos):
        label = i % n_classes
        pixels = synthetic_frames(rng, frames[i % len(frames)], size[0], size[1], label)
        write_video(base / f"class_{label:03d}" / f"clip_{i:05d}{CODEC_SUFFIX.get(codec, '.mkv')}",
                    pixels, codec=codec)
        if progress is not None:
            progress(i + 1, n_videos)
    (base / ".complete").write_text("ok\n")
    return base
