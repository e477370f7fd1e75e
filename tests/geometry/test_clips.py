"""Clip starts and frame indices: pure functions of (seed, epoch, index)."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.geometry.clips import (
    check_loader_pad,
    clip_frame_indices,
    clip_lengths,
    clip_span,
    clip_starts,
)


def starts(index, counts, *, seed=0, epoch=0, clip_length=8, stride=2, train=True, **kw):
    return clip_starts(seed, epoch, np.asarray(index), np.asarray(counts),
                       clip_length=clip_length, stride=stride, train=train, **kw)


def test_span():
    assert clip_span(8, 1) == 8 and clip_span(8, 2) == 15 and clip_span(1, 5) == 1


def test_train_starts_are_deterministic_and_depend_on_seed_epoch_index():
    index, counts = np.arange(64), np.full(64, 100)
    first = starts(index, counts)
    np.testing.assert_array_equal(first, starts(index, counts))
    np.testing.assert_array_equal(first[10:20], starts(index[10:20], counts[10:20]))
    assert not np.array_equal(first, starts(index, counts, seed=1))
    assert not np.array_equal(first, starts(index, counts, epoch=1))
    assert len(np.unique(first)) > 20


def test_train_starts_cover_exactly_the_valid_range():
    counts = np.full(4000, 20)  # span 15: valid starts 0..5
    drawn = starts(np.arange(4000), counts)
    assert drawn.dtype == np.int64
    assert set(np.unique(drawn).tolist()) == set(range(6))
    assert np.bincount(drawn).min() > 4000 / 6 * 0.8  # roughly uniform


def test_short_videos_start_at_zero():
    counts = np.array([1, 5, 14, 15, 16])
    drawn = starts(np.arange(5), counts, train=True)  # span 15: only 16 frames leave a choice
    np.testing.assert_array_equal(drawn[:4], 0)
    assert drawn[4] in (0, 1)
    np.testing.assert_array_equal(starts(np.arange(5), counts, train=False), [0, 0, 0, 0, 0])


def test_eval_starts_are_centred():
    counts = np.array([100, 15, 16, 17, 8])
    got = starts(np.arange(5), counts, train=False, clip_length=8, stride=2)
    np.testing.assert_array_equal(got, [(100 - 15) // 2, 0, 0, 1, 0])
    middle = got[0] + 7  # clip frames got..got+14; its middle frame
    assert abs(middle - 99 / 2) <= 1


def test_eval_clips_per_video_centre_each_part_of_the_range():
    ids = np.arange(4)
    got = starts(np.zeros(4), np.full(4, 95), train=False, clips_per_video=4, clip_id=ids)
    m = 95 - 15  # last valid start 80, split into 4 parts of 20
    np.testing.assert_array_equal(got, [10, 30, 50, 70])
    assert got.max() <= m


def test_train_clips_per_video_are_independent_draws():
    index = np.repeat(np.arange(50), 3)
    ids = np.tile(np.arange(3), 50)
    got = starts(index, np.full(150, 500), clips_per_video=3, clip_id=ids).reshape(50, 3)
    assert np.mean(got[:, 0] != got[:, 1]) > 0.9
    # clip 0 does not depend on how many clips are drawn per video
    np.testing.assert_array_equal(got[:, 0], starts(np.arange(50), np.full(50, 500)))


@pytest.mark.parametrize("bad", [dict(clip_length=0), dict(stride=0), dict(clips_per_video=0),
                                 dict(clip_id=np.array([0, 1]))])
def test_start_arguments_are_checked(bad):
    with pytest.raises(ValueError):
        starts(np.arange(2), np.full(2, 50), **bad)
    with pytest.raises(ValueError, match="frame counts"):
        starts(np.arange(2), np.array([5, 0]))


def test_indices_with_stride_inside_the_video():
    idx, valid = clip_frame_indices(3, 50, 4, 5)
    np.testing.assert_array_equal(idx, [3, 8, 13, 18])
    assert valid.all()


def test_repeat_last_pads_with_the_videos_last_frame():
    idx, valid = clip_frame_indices(30, 40, 5, 4)  # raw 30 34 38 42 46
    np.testing.assert_array_equal(idx, [30, 34, 38, 39, 39])  # = DALI pad_mode="edge"
    np.testing.assert_array_equal(valid, [True, True, True, False, False])


def test_indices_are_vectorised_over_a_batch():
    counts = np.array([100, 3, 20])
    first = starts(np.arange(3), counts, clip_length=4, stride=3)
    idx, valid = clip_frame_indices(first, counts, 4, 3)
    assert idx.shape == valid.shape == (3, 4)
    for b in range(3):
        one, one_valid = clip_frame_indices(first[b], counts[b], 4, 3)
        np.testing.assert_array_equal(idx[b], one)
        np.testing.assert_array_equal(valid[b], one_valid)
    np.testing.assert_array_equal(idx[1], [0, 2, 2, 2])
    assert (idx < counts[:, None]).all() and (idx >= 0).all()


def test_index_arguments_are_checked():
    with pytest.raises(ValueError, match="outside"):
        clip_frame_indices(10, 10, 4, 1)
    with pytest.raises(ValueError, match="outside"):
        clip_frame_indices(-1, 10, 4, 1)
    with pytest.raises(ValueError, match="positive"):
        clip_frame_indices(0, 10, 4, 1.5)


def test_clip_lengths_count_the_real_frames_of_each_clip():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 40, 500)
    for clip_length, stride in ((8, 1), (8, 2), (5, 3), (1, 4)):
        first = starts(np.arange(500), counts, clip_length=clip_length, stride=stride)
        _, valid = clip_frame_indices(first, counts, clip_length, stride)
        got = clip_lengths(first, counts, clip_length, stride)
        np.testing.assert_array_equal(got, valid.sum(axis=1))
        assert np.all(valid == (np.arange(clip_length) < got[:, None]))  # a prefix
    assert clip_lengths(0, 5, 8, 2) == 3 and clip_lengths(0, 6, 8, 2) == 3
    assert clip_lengths(5, 20, 8, 2) == 8
    with pytest.raises(ValueError, match="outside"):
        clip_lengths(5, 5, 8, 2)


def test_loader_pad_modes():
    assert check_loader_pad("variable") == "variable"
    for bad in ("none", "loop", None, 1):
        with pytest.raises(ValueError, match="pad must be one of"):
            check_loader_pad(bad)
