"""The built-in large-photo set: sizes, baseline and progressive files, cached."""
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sample_data.sample_images import LARGE_SIDES, large_photo_dataset


def test_large_photos_are_large_mixed_and_cached(tmp_path):
    root = large_photo_dataset(n_images=2, n_classes=2, root=tmp_path)
    files = sorted(root.glob("class_*/*.jpg"))
    assert len(files) == 2 and (root / ".complete").exists()
    kinds = []
    for f in files:
        data = f.read_bytes()
        h, w = jpeg_size(data, f)
        assert LARGE_SIDES[0] <= max(h, w) <= LARGE_SIDES[1] and min(h, w) >= 2000
        kinds.append(b"\xff\xc2" in data[:4096])  # SOF2: progressive
    assert kinds == [False, True]
    stamp = files[0].stat().st_mtime_ns
    assert large_photo_dataset(n_images=2, n_classes=2, root=tmp_path) == root
    assert files[0].stat().st_mtime_ns == stamp  # the second call reuses the files
