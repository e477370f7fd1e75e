"""Clip crop windows: torchvision's short-side sizes and centre crop, the plan's random
offsets, multi-view positions, the source region of interest and the option checks."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import functional as F

from dali_pipes.geometry.clip_crops import (
    check_crop_options,
    clip_windows,
    default_short_side,
    resized_shapes,
    source_roi,
)

SHAPES = [(36, 64), (64, 36), (48, 64), (50, 50), (1080, 1920), (37, 101), (101, 37)]


def test_resized_shapes_are_torchvisions():
    heights, widths = zip(*SHAPES, strict=True)
    for short in (16, 20, 128, 256):
        got = resized_shapes(heights, widths, short)
        for (h, w), row in zip(SHAPES, got.tolist(), strict=True):
            image = torch.zeros(3, h, w, dtype=torch.uint8)
            assert list(F.resize(image, [short], antialias=True).shape[-2:]) == row


def test_eval_windows_are_torchvisions_centre_crop():
    heights, widths = zip(*SHAPES, strict=True)
    windows = clip_windows(0, 0, np.arange(len(SHAPES)), heights, widths, size=(16, 16),
                           short_side=20, train=False)
    for row in windows.tolist():
        resized = torch.arange(row[0] * row[1]).view(1, row[0], row[1])
        expected = F.center_crop(resized, [16, 16])
        assert torch.equal(F.crop(resized, row[2], row[3], 16, 16), expected)
    again = clip_windows(7, 3, np.arange(len(SHAPES)) + 50, heights, widths, size=(16, 16),
                         short_side=20, train=False)
    np.testing.assert_array_equal(again, windows)  # no seed, epoch or key in evaluation


def test_train_windows_are_a_pure_function_of_seed_epoch_key():
    keys = np.arange(200)
    h, w = np.full(200, 36), np.full(200, 64)
    a = clip_windows(1, 0, keys, h, w, size=(16, 24), short_side=24, train=True)
    np.testing.assert_array_equal(a, clip_windows(1, 0, keys, h, w, size=(16, 24),
                                                  short_side=24, train=True))
    assert not np.array_equal(a, clip_windows(1, 1, keys, h, w, size=(16, 24),
                                              short_side=24, train=True))
    assert (a[:, 0] == 24).all() and (a[:, 1] == 42).all()
    for axis, room in ((2, 24 - 16), (3, 42 - 24)):  # every offset in range, each one drawn
        assert a[:, axis].min() == 0 and a[:, axis].max() == room
        assert len(np.unique(a[:, axis])) == room + 1
    one = clip_windows(1, 0, keys[17:18], h[:1], w[:1], size=(16, 24), short_side=24,
                       train=True)
    np.testing.assert_array_equal(one[0], a[17])  # batch-independent


def test_multi_view_windows_run_along_the_long_side():
    heights, widths = [36, 36, 36, 64, 64, 64], [64, 64, 64, 36, 36, 36]
    windows = clip_windows(0, 0, np.arange(6), heights, widths, size=(16, 16),
                           short_side=20, train=False, crop_id=[0, 1, 2] * 2, crops=3)
    assert windows[:3, 3].tolist() == [0, 10, 19] and windows[:3, 2].tolist() == [2] * 3
    assert windows[3:, 2].tolist() == [0, 10, 19] and windows[3:, 3].tolist() == [2] * 3
    five = clip_windows(0, 0, np.arange(5), [36] * 5, [64] * 5, size=(16, 16),
                        short_side=20, train=False, crop_id=np.arange(5), crops=5)
    assert five[:, 3].tolist() == [0, 5, 10, 14, 19]
    with pytest.raises(ValueError, match="crop_id"):
        clip_windows(0, 0, [0], [36], [64], size=(16, 16), short_side=20, train=False,
                     crop_id=[3], crops=3)


def test_source_roi_equals_resize_then_crop():
    window = clip_windows(0, 0, [0], [36], [64], size=(16, 16), short_side=20,
                          train=False)
    start, end = source_roi(window, [36], [64], (16, 16))
    assert start.dtype == np.float32 and start.shape == end.shape == (1, 2)
    rh, rw, top, left = window[0].tolist()
    np.testing.assert_allclose(start[0], [top * 36 / rh, left * 64 / rw], rtol=1e-6)
    np.testing.assert_allclose(end[0], [(top + 16) * 36 / rh, (left + 16) * 64 / rw],
                               rtol=1e-6)


def test_a_crop_that_does_not_fit_is_an_error():
    with pytest.raises(ValueError, match=r"size=\(16, 32\) does not fit"):
        clip_windows(0, 0, [0], [64], [36], size=(16, 32), short_side=20, train=True)


def test_option_checks():
    assert check_crop_options(resize="squash", short_side=None, views=None, size=(8, 8),
                              train=True, clips_per_video=3) == (None, 3, 1)
    assert check_crop_options(resize="short_side", short_side=None, views=(10, 3),
                              size=(224, 224), train=False, clips_per_video=1) == (256, 10, 3)
    assert default_short_side((112, 112)) == 128
    assert check_crop_options(resize="squash", short_side=None, views=(4, 1), size=(8, 8),
                              train=False, clips_per_video=1) == (None, 4, 1)
    for options, match in (
            (dict(resize="short"), "resize"), (dict(short_side=7), "short_side"),
            (dict(short_side=True), "short_side"), (dict(resize="squash", short_side=9),
                                                    "short_side"),
            (dict(size=None), "size must not be None"), (dict(views=(2, 3)), "train=False"),
            (dict(views=(2, 3), train=False, clips_per_video=2), "clips_per_video"),
            (dict(views=(2, 3), train=False, resize="squash"), "resize='short_side'"),
            (dict(views=(2, -1), train=False), "views"),
            (dict(views=[2, 3, 4], train=False), "views")):
        kw = dict(resize="short_side", short_side=None, views=None, size=(8, 8),
                  train=True, clips_per_video=1)
        kw.update(options)
        with pytest.raises(ValueError, match=match):
            check_crop_options(**kw)
