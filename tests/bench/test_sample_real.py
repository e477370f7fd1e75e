"""The built-in set of crops of real photos: sizes, determinism, JPEG kind, cache, --sample real."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench import compare
from dali_pipes.formats.jpeg import as_view, read_header
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sample_data.sample_real import (
    REAL_SIDES,
    crop_box,
    default_sources,
    real_photo_crops,
)

mpl = pytest.importorskip("matplotlib")
GRACE = Path(mpl.get_data_path()) / "sample_data" / "grace_hopper.jpg"


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("class_*/*.jpg"))


def test_crops_are_imagenet_sized_baseline_420_jpegs_and_cached(tmp_path):
    root = real_photo_crops(n_images=8, n_classes=3, root=tmp_path, sources=[GRACE])
    files = _files(root)
    assert len(files) == 8 and (root / ".complete").exists()
    assert sorted({f.parent.name for f in files}) == ["class_000", "class_001", "class_002"]
    longs = []
    for f in files:
        data = f.read_bytes()
        h, w = jpeg_size(data, f)
        header = read_header(as_view(data), f)
        assert header.sof == 0xC0  # baseline
        assert header.components == ((1, 2, 2), (2, 1, 1), (3, 1, 1))  # 4:2:0
        assert REAL_SIDES[0] <= max(h, w) <= REAL_SIDES[1]
        assert 3 / 4 * 0.98 <= w / h <= 4 / 3 * 1.02
        with Image.open(f) as img:
            pixels = np.asarray(img.convert("RGB"), dtype=np.float32)
        assert pixels.shape == (h, w, 3) and pixels.std() > 10  # a picture, not a flat fill
        longs.append(max(h, w))
    assert len(set(longs)) > 4  # the sizes vary
    stamp = files[0].stat().st_mtime_ns
    assert real_photo_crops(n_images=8, n_classes=3, root=tmp_path, sources=[GRACE]) == root
    assert files[0].stat().st_mtime_ns == stamp  # the second call reuses the files


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def contents(sub: str, seed: int) -> list[bytes]:
        root = real_photo_crops(n_images=3, root=tmp_path / sub, seed=seed, sources=[GRACE])
        return [f.read_bytes() for f in _files(root)]

    first = contents("a", 0)
    assert contents("b", 0) == first
    assert contents("c", 1) != first


def test_crop_box_area_and_aspect_with_a_fallback_for_panoramas():
    rng = np.random.default_rng(0)
    for _ in range(200):
        top, left, h, w = crop_box(rng, 600, 512)
        assert 0 <= top <= 600 - h and 0 <= left <= 512 - w
        assert 0.1 * 0.97 <= h * w / (600 * 512) <= 1.0
        assert math.log(3 / 4) - 0.02 <= math.log(w / h) <= math.log(4 / 3) + 0.02
    assert crop_box(np.random.default_rng(0), 50, 1000) == (0, 467, 50, 66)


def test_missing_source_and_missing_scikit_image_are_named(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="nope.jpg"):
        real_photo_crops(n_images=1, root=tmp_path, sources=[tmp_path / "nope.jpg"])
    monkeypatch.setitem(sys.modules, "skimage", None)  # as if not installed
    with pytest.raises(RuntimeError, match=r"scikit-image.*\.\[peers\]"):
        default_sources()


def test_default_sources_are_colour_photographs():
    pytest.importorskip("skimage")
    sources = default_sources()
    assert len(sources) == 10
    for path in sources:
        with Image.open(path) as img:
            rgb = np.asarray(img.convert("RGB"), dtype=np.int16)
        assert min(rgb.shape[:2]) >= 300, path
        assert np.abs(rgb[..., 0] - rgb[..., 2]).mean() > 5, path  # not grey


def test_compare_accepts_sample_real_for_images_only():
    assert compare.parse_args(["--sample", "real"]).sample == "real"
    with pytest.raises(SystemExit, match="--sample real: only for --modality image"):
        compare.sample_data("video", "real")
