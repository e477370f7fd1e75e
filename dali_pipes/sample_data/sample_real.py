"""ImageNet-like crops of real photographs: a built-in sample set with real image content.

The synthetic sets (`sample_images`) have photographic statistics; this one is cut from real
colour photographs shipped with scikit-image (`skimage.data`) and matplotlib (Grace
Hopper's portrait). Each file is a random crop of a random source (area 10-100% of the
source, aspect 3:4 to 4:3, as RandomResizedCrop draws them), resized with PIL's
antialiasing Lanczos filter so its longer side is uniform in REAL_SIDES (ImageNet's
typical sizes), and encoded by PIL (libjpeg-turbo) as a baseline quality-90 4:2:0 JPEG.
Every choice comes from `numpy.random.default_rng(seed)`, so a seed gives the same bytes.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.sample_data.sample_images import cache_root, encode_jpeg

REAL_SIDES = (200, 640)  # longer side of the "real photos" set, in pixels
# the colour photographs in skimage.data (files of skimage/data; drawings, grey textures
# and the duplicate `cat` of chelsea left out)
SKIMAGE_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "hubble_deep_field.jpg",
                  "motorcycle_left.png", "motorcycle_right.png", "retina.jpg", "rocket.jpg",
                  "ihc.png")
_AREA = (0.10, 1.0)
_LOG_ASPECT = (math.log(3 / 4), math.log(4 / 3))


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_sources() -> list[Path]:
    """The source photographs: scikit-image's colour photos and matplotlib's grace_hopper."""
    skimage, mpl = _package_dir("skimage"), _package_dir("matplotlib")
    if skimage is None or mpl is None:
        missing = " and ".join(n for n, d in (("scikit-image", skimage), ("matplotlib", mpl))
                               if d is None)
        raise RuntimeError(f"the real-photo sample set needs {missing} (its source photos): "
                           'pip install -e ".[peers]"')
    return ([skimage / "data" / name for name in SKIMAGE_PHOTOS]
            + [mpl / "mpl-data" / "sample_data" / "grace_hopper.jpg"])


def _load_rgb(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"))
    except (OSError, UnidentifiedImageError) as exc:
        raise FormatError(path, "image", f"cannot open a source photo: {exc}") from exc


def crop_box(rng: np.random.Generator, height: int, width: int) -> tuple[int, int, int, int]:
    """(top, left, crop height, crop width): area 10-100% of the source, aspect 3:4-4:3.

    Ten draws as torchvision's RandomResizedCrop makes them; when none fits (a source much
    wider than tall), the largest centred crop of the allowed aspects.
    """
    area = height * width
    for _ in range(10):
        target = area * rng.uniform(*_AREA)
        aspect = math.exp(rng.uniform(*_LOG_ASPECT))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return top, left, h, w
    h = min(height, int(width * 4 / 3))
    w = min(width, int(h * 4 / 3))
    return (height - h) // 2, (width - w) // 2, h, w


def real_crop(rng: np.random.Generator, source: np.ndarray) -> np.ndarray:
    """One crop of `source`, resized so its longer side is uniform in REAL_SIDES."""
    from PIL import Image

    top, left, h, w = crop_box(rng, *source.shape[:2])
    long_side = int(rng.integers(REAL_SIDES[0], REAL_SIDES[1] + 1))
    scale = long_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))  # PIL: (width, height)
    crop = Image.fromarray(np.ascontiguousarray(source[top:top + h, left:left + w]))
    return np.asarray(crop.resize(size, Image.Resampling.LANCZOS))


def real_photo_crops(*, n_images: int = 512, n_classes: int = 4, root: Path | None = None,
                     seed: int = 0, progress=None,
                     sources: Sequence[str | Path] | None = None) -> Path:
    """Create (once) and return class folders of JPEG crops of real photographs.

    Args:
        n_images: number of files (512 by default: about 30 MB).
        n_classes: class folders (file i goes to class i % n_classes).
        root: parent folder (default: `cache_root()`).
        seed: seed of every random choice (source, crop, size).
        progress: called with (done, total) while files are written.
        sources: image files to crop from (default: `default_sources()`, which needs
            scikit-image and matplotlib).

    Returns:
        The folder of class folders; its name encodes the parameters and a hash of the
        sources' bytes, so changed sources or parameters never reuse stale files.
    """
    paths = [Path(s) for s in (default_sources() if sources is None else sources)]
    if not paths:
        raise ValueError("real_photo_crops: sources is empty")
    digest = hashlib.sha1(repr((n_images, n_classes, REAL_SIDES, seed, 1)).encode())
    for path in paths:
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            raise FormatError(path, "image", f"cannot read a source photo: {exc}") from exc
    base = (root or cache_root()) / f"real-photos-{n_images}-{digest.hexdigest()[:10]}"
    if (base / ".complete").exists():
        return base
    pixels = [_load_rgb(p) for p in paths]
    rng = np.random.default_rng(seed)
    for i in range(n_images):
        folder = base / f"class_{i % n_classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        crop = real_crop(rng, pixels[int(rng.integers(len(pixels)))])
        (folder / f"img_{i:06d}.jpg").write_bytes(encode_jpeg(crop, quality=90))
        if progress is not None:
            progress(i + 1, n_images)
    (base / ".complete").write_text("ok\n")
    return base
