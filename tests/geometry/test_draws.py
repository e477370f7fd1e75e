import math

import numpy as np
import pytest

from dali_pipes.geometry import draws


def test_uniforms_pure_and_independent_of_batch_composition():
    idx = np.array([5, 9, 1000])
    a = draws.uniforms(1, 2, idx, draws.STREAM_CROP, 8)
    b = draws.uniforms(1, 2, idx[::-1], draws.STREAM_CROP, 8)[::-1]
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 8) and (a >= 0).all() and (a < 1).all()
    assert not np.array_equal(a, draws.uniforms(1, 3, idx, draws.STREAM_CROP, 8))
    assert not np.array_equal(a, draws.uniforms(2, 2, idx, draws.STREAM_CROP, 8))
    assert not np.array_equal(a, draws.uniforms(1, 2, idx, draws.STREAM_FLIP, 8))


def test_uniforms_are_uniform():
    u = draws.uniforms(0, 0, np.arange(200_000), 1, 2)
    assert abs(u.mean() - 0.5) < 0.005
    hist, _ = np.histogram(u, bins=10, range=(0, 1))
    assert hist.min() > 0.95 * hist.mean()


def _torchvision_rrc(height, width, uniforms, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params with its random draws replaced by ours."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for u in uniforms:
        target_area = area * (scale[0] + u[0] * (scale[1] - scale[0]))
        aspect = math.exp(log_ratio[0] + u[1] * (log_ratio[1] - log_ratio[0]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(u[2] * (height - h + 1)), int(u[3] * (width - w + 1)), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


@pytest.mark.parametrize("height,width", [(375, 500), (500, 375), (64, 64), (20, 400),
                                          (400, 20), (1, 1)])
def test_random_resized_crop_matches_torchvision_semantics(height, width):
    idx = np.arange(300)
    got = draws.random_resized_crop(4, 1, idx, np.full(300, height), np.full(300, width))
    drawn = draws.uniforms(4, 1, idx, draws.STREAM_CROP, 40).reshape(300, 10, 4)
    for i in range(300):
        assert tuple(got[i]) == _torchvision_rrc(height, width, drawn[i]), i
    top, left, h, w = got.T
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + h <= height).all() and (left + w <= width).all() and (h > 0).all()


def test_center_crop_equals_resize_then_center_crop():
    win = draws.center_crop(np.array([375, 500, 256]), np.array([500, 375, 256]), 224)
    # shorter side 375 -> 256 means a 224 crop covers 375 * 224 / 256 = 328 source pixels
    np.testing.assert_array_equal(win[0], [24, 86, 328, 328])
    np.testing.assert_array_equal(win[1], [86, 24, 328, 328])
    np.testing.assert_array_equal(win[2], [16, 16, 224, 224])


def test_image_params_eval_has_no_flip_and_train_flips_half():
    idx = np.arange(4000)
    hw = np.full(4000, 100)
    _, flip = draws.image_params(0, 0, idx, hw, hw, size=32, train=True)
    assert 0.45 < flip.mean() < 0.55
    windows, flip = draws.image_params(0, 0, idx, hw, hw, size=32, train=False)
    assert not flip.any() and (windows == windows[0]).all()



def test_every_random_stream_has_its_own_number():
    """Streams separate the draws of one (seed, epoch, key): two definitions with one
    number would correlate them (e.g. erasing boxes with video crop offsets)."""
    import re
    from pathlib import Path

    import dali_pipes
    streams: dict[int, list[str]] = {}
    for path in sorted(Path(dali_pipes.__file__).parent.rglob("*.py")):
        for name, value in re.findall(r"^(STREAM_\w+) = (\d+)", path.read_text(), re.M):
            streams.setdefault(int(value), []).append(f"{path.stem}.{name}")
    assert len(streams) >= 10, streams
    assert all(len(names) == 1 for names in streams.values()), streams
