"""The built-in sample JPEG set: deterministic for any thread count, ImageNet-like files,
photographic statistics, progress reported, cached."""
import numpy as np
from PIL import Image

from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sample_data.sample_images import IMAGE_SIZE, image_dataset
from dali_pipes.sample_data.sample_photos import fast_photo


def test_sample_set_is_the_same_for_any_thread_count(tmp_path):
    seen = []
    one = image_dataset(n_images=12, n_classes=3, root=tmp_path / "a", threads=1)
    four = image_dataset(n_images=12, n_classes=3, root=tmp_path / "b", threads=4,
                         progress=lambda done, total: seen.append((done, total)))
    files = sorted(p.relative_to(one) for p in one.glob("class_*/*.jpg"))
    assert len(files) == 12 and {p.parent.name for p in files} == {
        "class_000", "class_001", "class_002"}
    assert files == sorted(p.relative_to(four) for p in four.glob("class_*/*.jpg"))
    assert all((one / p).read_bytes() == (four / p).read_bytes() for p in files)
    assert seen == [(k, 12) for k in range(1, 13)]
    sizes = [(one / p).stat().st_size for p in files]
    assert 50_000 < np.mean(sizes) < 130_000  # ImageNet-like JPEG sizes at 500x375, q90
    assert all(jpeg_size((one / p).read_bytes(), p) == IMAGE_SIZE for p in files)
    stamp = (one / files[0]).stat().st_mtime_ns
    assert image_dataset(n_images=12, n_classes=3, root=tmp_path / "a") == one
    assert (one / files[0]).stat().st_mtime_ns == stamp  # cached: not written again


def test_sample_photos_have_photographic_statistics(tmp_path):
    images = [fast_photo(0, i, 96, 128).astype(np.float64) for i in range(4)]
    assert len({im.tobytes() for im in images}) == 4  # every index its own image
    for im in images:
        assert 40 < im.mean() < 215 and im.std() > 20
        channels = im.reshape(-1, 3).T
        corr = np.corrcoef(channels)
        assert not np.allclose(corr, np.eye(3), atol=0.02)  # correlated colour planes
        # 1/f spectrum: much more energy at low spatial frequencies than high ones
        power = np.abs(np.fft.rfft2(im[..., 1] - im[..., 1].mean())) ** 2
        assert power[1:8, 1:8].mean() > 50 * power[40:, 40:].mean()
    Image.fromarray(images[0].astype(np.uint8)).save(tmp_path / "x.png")  # a valid RGB image
