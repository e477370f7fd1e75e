"""Built-in fused sample data: small VP9 clips, each with a 200 Hz `<stem>.imu.csv` beside it.

Each IMU stream is on its own clock: IMU time = video time + `clock_offset` (so pass
`imu_offset=clock_offset` to align it). It starts a little after the video's first frame and
ends a little after its last, and it drops out for `gap` seconds (video clock) in the middle,
so some frames fall outside the stream and some inside the gap. Channels are a 3-axis
accelerometer and a 3-axis gyroscope: smooth class-dependent sinusoids plus a little noise,
fully determined by `seed`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from dali_pipes.formats.imu import imu_path_for, write_imu
from dali_pipes.sample_data.sample_images import cache_root
from dali_pipes.sample_data.sample_video import small_video_folder

CHANNELS = ("ax", "ay", "az", "gx", "gy", "gz")
FPS = 25  # dali_pipes.sample_data.sample_video.write_video's default rate


def imu_stream(rng: np.random.Generator, duration: float, label: int, *, rate: float = 200.0,
               clock_offset: float = 0.25, lead: float = 0.06, gap: tuple[float, float]
               | None = (0.4, 0.2)) -> tuple[np.ndarray, np.ndarray]:
    """(t (N,) on the IMU clock, values (N, 6)) covering video time [lead, duration + 0.1]
    minus the dropout `gap` = (start as a fraction of the duration, length in seconds)."""
    t = np.arange(lead, duration + 0.1, 1.0 / rate)
    if gap is not None:
        g0 = gap[0] * duration
        t = t[(t < g0) | (t >= g0 + gap[1])]
    phase = rng.uniform(0, 2 * np.pi, len(CHANNELS))
    freq = 0.5 + 0.3 * label + 0.1 * np.arange(len(CHANNELS))
    values = np.sin(2 * np.pi * freq * t[:, None] + phase) + 0.01 * rng.standard_normal(
        (len(t), len(CHANNELS)))
    return t + clock_offset, values


def small_fusion_folder(root: Path, *, n_videos: int = 4, n_classes: int = 2,
                        frames=(24, 40, 31), size=(32, 24), seed: int = 0,
                        clock_offset: float = 0.25, gap=(0.4, 0.2), rate: float = 200.0,
                        lead: float = 0.06) -> Path:
    """`root/class_k/vid_i.webm` + `vid_i.imu.csv` (see the module docstring)."""
    small_video_folder(root, n_videos=n_videos, n_classes=n_classes, frames=frames,
                       size=size, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for i in range(n_videos):
        label = i % n_classes
        video = root / f"class_{label}" / f"vid_{i:04d}.webm"
        duration = (frames[i % len(frames)] - 1) / FPS
        t, values = imu_stream(rng, duration, label, rate=rate, clock_offset=clock_offset,
                               lead=lead, gap=gap)
        write_imu(imu_path_for(video), t, values, CHANNELS)
    return root


def fusion_dataset(*, n_videos: int = 32, n_classes: int = 4, size=(160, 120),
                   frames=(48, 64, 80, 96), seed: int = 0, root: Path | None = None,
                   progress=None) -> Path:
    """Create (once) and return a folder of class folders of VP9 clips with IMU CSVs."""
    key = hashlib.sha1(repr((n_videos, n_classes, size, frames, seed, "fusion", 1))
                       .encode()).hexdigest()
    base = (root or cache_root()) / f"fusion-{n_videos}x{size[0]}x{size[1]}-{key[:10]}"
    if (base / ".complete").exists():
        return base
    small_fusion_folder(base, n_videos=n_videos, n_classes=n_classes, frames=frames,
                        size=size, seed=seed)
    if progress is not None:
        progress(n_videos, n_videos)
    (base / ".complete").write_text("ok\n")
    return base
