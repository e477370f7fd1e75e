"""Built-in sample data sets for the benchmarks: deterministic, realistic, cached.

The images are synthetic but photographic in the ways that matter to a decoder: a 1/f
("pink") amplitude spectrum like natural scenes, correlated colour channels, hard-edged
objects and sensor noise, at ImageNet-like sizes (500x375), encoded as quality-90 4:2:0
JPEGs. They compress to sizes typical of ImageNet files, so decode cost is realistic.
`image_dataset` makes its 640 files in seconds (`sample_photos`: the same statistics, made
from a bank of fields, several threads).
"""
from __future__ import annotations

import hashlib
import io
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from dali_pipes.sample_data.sample_photos import encode_fast, fast_photo

IMAGE_SIZE = (375, 500)  # (height, width), the most common ImageNet size
LARGE_SIDES = (3000, 6000)  # longest side of the "large photos" set, in pixels


def cache_root() -> Path:
    """Where sample data sets live: $DALI_PIPES_CACHE or ~/.cache/dali-pipes."""
    env = os.environ.get("DALI_PIPES_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dali-pipes"


def photo_like(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """One (height, width, 3) uint8 image with natural-image statistics."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    radius = np.sqrt(fx * fx + fy * fy)
    radius[0, 0] = 1.0
    amplitude = radius ** -1.1
    amplitude[0, 0] = 0.0
    mix = rng.normal(size=(3, 3)) * 0.35 + np.eye(3)
    planes = []
    for _ in range(3):
        phase = rng.uniform(0, 2 * np.pi, size=amplitude.shape)
        planes.append(np.fft.irfft2(amplitude * np.exp(1j * phase), s=(height, width)))
    img = np.einsum("ij,jhw->hwi", mix, np.stack(planes))
    img = (img - img.mean()) / (img.std() + 1e-9) * 48 + rng.uniform(90, 160, size=3)
    _draw_objects(rng, img)
    img += rng.normal(scale=3.0, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _draw_objects(rng: np.random.Generator, img: np.ndarray) -> None:
    height, width = img.shape[:2]
    yy, xx = np.mgrid[0:height, 0:width]
    for _ in range(int(rng.integers(2, 6))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry = rng.uniform(min(15.0, height / 6), height / 3)
        rx = rng.uniform(min(15.0, width / 6), width / 3)
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1.0
        shade = (xx[mask] - cx) / rx * rng.uniform(10, 40)
        img[mask] = rng.uniform(20, 235, size=3) + shade[:, None]


def encode_jpeg(pixels: np.ndarray, quality: int = 90, *, progressive: bool = False) -> bytes:
    """Encode (height, width, 3) uint8 pixels as a 4:2:0 JPEG, baseline or progressive."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=quality, subsampling="4:2:0",
                                 progressive=progressive)
    return buf.getvalue()


def image_dataset(*, n_images: int = 640, n_classes: int = 10, root: Path | None = None,
                  size: tuple[int, int] = IMAGE_SIZE, seed: int = 0, progress=None,
                  threads: int | None = None) -> Path:
    """Create (once) and return a folder of class folders of JPEGs.

    The images come from `sample_photos.fast_photo` (the statistics of `photo_like`, a
    few milliseconds each), written by `threads` threads (default: up to 4, one per core);
    image i depends only on (seed, i), so the files are the same for any thread count.
    `progress`, when given, is called with (done, total) while files are written (from
    the calling thread). The folder name encodes every parameter and the generator's
    version, so a changed request never reuses stale files.
    """
    key = hashlib.sha1(repr((n_images, n_classes, size, seed, 2)).encode()).hexdigest()[:10]
    base = (root or cache_root()) / f"images-{n_images}x{size[1]}x{size[0]}-{key}"
    done_marker = base / ".complete"
    if done_marker.exists():
        return base
    for label in range(min(n_classes, n_images)):
        (base / f"class_{label:03d}").mkdir(parents=True, exist_ok=True)

    def write(i: int) -> None:
        data = encode_fast(fast_photo(seed, i, *size))
        (base / f"class_{i % n_classes:03d}" / f"img_{i:06d}.jpg").write_bytes(data)

    workers = threads or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="sample-photos") as pool:
        for done, _ in enumerate(pool.map(write, range(n_images)), start=1):
            if progress is not None:
                progress(done, n_images)
    done_marker.write_text("ok\n")
    return base


def large_photo_dataset(*, n_images: int = 48, n_classes: int = 4, root: Path | None = None,
                        seed: int = 0, progress=None) -> Path:
    """Create (once) and return class folders of large camera-like JPEGs.

    The longest side is drawn in LARGE_SIDES, landscape or portrait, 4:3 or 3:2; every
    other file is progressive (as many cameras and web exports write them), the others
    baseline, quality 85 4:2:0. The statistics are those of `photo_like`, rendered at a
    quarter of the size and upsampled with a bicubic filter (a camera's optics blur as
    much), which keeps creating the set to about a second per image.

    Args:
        n_images: number of files (48 by default: about 250 MB).
        n_classes: class folders.
        root: parent folder (default: `cache_root()`).
        seed: seed of every random choice.
        progress: called with (done, total) while files are written.

    Returns:
        The folder of class folders.
    """
    key = hashlib.sha1(repr((n_images, n_classes, LARGE_SIDES, seed, 1)).encode()
                       ).hexdigest()[:10]
    base = (root or cache_root()) / f"large-photos-{n_images}-{key}"
    if (base / ".complete").exists():
        return base
    rng = np.random.default_rng(seed)
    for i in range(n_images):
        folder = base / f"class_{i % n_classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = encode_jpeg(large_photo(rng), quality=85, progressive=i % 2 == 1)
        (folder / f"photo_{i:04d}.jpg").write_bytes(data)
        if progress is not None:
            progress(i + 1, n_images)
    (base / ".complete").write_text("ok\n")
    return base


def large_photo(rng: np.random.Generator) -> np.ndarray:
    """One (height, width, 3) uint8 photo-like image, longest side in LARGE_SIDES."""
    from PIL import Image

    long_side = int(rng.integers(LARGE_SIDES[0], LARGE_SIDES[1] + 1))
    short_side = int(long_side * (3 / 4 if rng.random() < 0.5 else 2 / 3))
    height, width = (short_side, long_side) if rng.random() < 0.7 else (long_side, short_side)
    small = photo_like(rng, height // 4, width // 4)
    big = np.asarray(Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC))
    grain = rng.normal(scale=2.5, size=(height, width, 1)).astype(np.float32)
    return np.clip(big + grain, 0, 255).astype(np.uint8)
