"""Tiny data sets of every modality kind, for tests (`torch_bridge.registry` names them).

Each writer is `write(root, source) -> Path`: the data set `source` (0 or 1, two different
ones, so tests can also build two-source loaders) written under `root`, deterministic.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like


def write_image_folder(root: Path, *, n_images: int, n_classes: int, seed: int = 0,
                       sizes=((90, 120), (120, 90), (100, 100), (75, 140))) -> Path:
    """`root/class_k/img_i.jpg` with a few different image sizes and orientations.

    Args:
        root: the folder to write (created).
        n_images: JPEG files in all.
        n_classes: class folders; image i goes to class i % n_classes.
        seed: the pixels' random seed.
        sizes: (height, width) of the images, in turn.

    Returns:
        `root`.
    """
    rng = np.random.default_rng(seed)
    for i in range(n_images):
        folder = root / f"class_{i % n_classes}"
        folder.mkdir(parents=True, exist_ok=True)
        h, w = sizes[i % len(sizes)]
        (folder / f"img_{i:04d}.jpg").write_bytes(encode_jpeg(photo_like(rng, h, w)))
    return root


def image(root: Path, source: int) -> Path:
    """10 (source 0) or 6 (source 1) JPEGs in 2 classes."""
    return write_image_folder(root, n_images=(10, 6)[source], n_classes=2, seed=3 * source)


def video(root: Path, source: int) -> Path:
    """5 or 3 VP9 clips of 32x24 in 2 classes, 24, 12 and 17 frames long in turn."""
    from dali_pipes.sample_data.sample_video import small_video_folder
    return small_video_folder(root, n_videos=(5, 3)[source], n_classes=2,
                              frames=(24, 12, 17), size=(32, 24), seed=source)


def frames(root: Path, source: int) -> Path:
    """The `video` data set of `source`, extracted into frame folders under `root` (the
    clips themselves go to a sibling folder)."""
    from dali_pipes.sources.frames import extract_tree
    clips = video(root.with_name(root.name + "_clips"), source)
    report = extract_tree(clips, root, progress=False)
    if report.failed:
        raise RuntimeError(f"extracting {clips} failed: {report.failed}")
    return root


def hyperspectral(root: Path, source: int) -> Path:
    """Three scenes (ENVI int16, ENVI float32, SPE) of 6x7 pixels and 4 bands."""
    from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
    small_scene_folder(root, lines=6, samples=7, bands=4, seed=source)
    return root


def fusion(root: Path, source: int) -> Path:
    """5 or 3 VP9 clips of 32x24 with 200 Hz IMU streams."""
    from dali_pipes.sample_data.sample_fusion import small_fusion_folder
    return small_fusion_folder(root, n_videos=(5, 3)[source], size=(32, 24), seed=source)
