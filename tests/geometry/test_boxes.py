"""Detection geometry (dali_pipes.geometry.boxes, dali_pipes.geometry.detection_options):
pure numpy."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.geometry import boxes as geo
from dali_pipes.geometry.detection_options import detection_options
from dali_pipes.geometry.draws import random_resized_crop

H = np.array([100, 300, 50])
W = np.array([200, 150, 50])


def test_eval_longer_side_fits_the_canvas_and_boxes_round_trip():
    g = geo.eval_geometry(H, W, (64, 64))
    assert g.resized.tolist() == [[32, 64], [64, 32], [64, 64]]
    assert g.content().tolist() == g.resized.tolist()
    box = np.array([[10.0, 20.0, 110.0, 70.0]])
    mapped, keep = geo.map_boxes(box, g.row(0))
    np.testing.assert_allclose(mapped, [[3.2, 6.4, 35.2, 22.4]], rtol=1e-6)
    np.testing.assert_allclose(geo.unmap_boxes(mapped, g.row(0)), box, rtol=1e-6)
    assert keep.tolist() == [True]


def test_eval_shorter_side_with_a_cap_and_pad_to_multiple():
    opts = detection_options(size=40, fit="shorter", max_size=70, pad_to_multiple=32,
                             train=False)
    assert opts.canvas == (96, 96)
    g = opts.geometry(0, 0, np.arange(3), H, W, [np.zeros((0, 4))] * 3)
    # shorter side 40 unless the longer would pass 70
    assert g.resized.tolist() == [[35, 70], [70, 35], [40, 40]]


def test_flip_mirrors_boxes_inside_the_resized_window():
    g = geo.Geometry(np.array([[0, 0, 10, 20]]), np.array([[10, 20]]), np.zeros((1, 2), int),
                     np.array([True]), (10, 20))
    mapped, _ = geo.map_boxes(np.array([[2.0, 1.0, 5.0, 4.0]]), g)
    assert mapped.tolist() == [[15.0, 1.0, 18.0, 4.0]]
    np.testing.assert_allclose(geo.unmap_boxes(mapped, g), [[2, 1, 5, 4]])


def test_boxes_are_clipped_to_the_window_and_small_ones_dropped_and_counted():
    g = geo.Geometry(np.array([[10, 10, 50, 50]]), np.array([[100, 100]]),
                     np.zeros((1, 2), int), np.array([False]), (100, 100))
    boxes = np.array([[0, 0, 20, 20],     # partly inside: clipped to (0, 0, 20, 20)
                      [0, 0, 10.2, 30],   # 0.2 px wide inside: 0.4 px after resize -> drop
                      [70, 70, 90, 90],   # outside the window: dropped
                      [20, 20, 30, 30]])
    mapped, keep = geo.map_boxes(boxes, g, min_box_size=1.0)
    assert keep.tolist() == [True, False, False, True]
    np.testing.assert_allclose(mapped, [[0, 0, 20, 20], [20, 20, 40, 40]])
    _, keep = geo.map_boxes(boxes, g, min_box_size=0.1)
    assert keep.tolist() == [True, True, False, True]


def test_first_crop_attempt_is_the_image_modalitys_window():
    keys = np.arange(3)
    plain = geo.crop_windows(1, 2, keys, H, W, [np.zeros((0, 4))] * 3)
    np.testing.assert_array_equal(plain, random_resized_crop(1, 2, keys, H, W))


def test_box_aware_windows_reach_min_iou_or_fall_back_to_the_image():
    keys = np.arange(64)
    h, w = np.full(64, 100), np.full(64, 100)
    boxes = [np.array([[10.0, 10.0, 60.0, 60.0]])] * 64
    windows = geo.crop_windows(0, 0, keys, h, w, boxes, min_iou=0.5)
    iou = np.array([geo.box_iou(windows[i:i + 1].astype(float), boxes[i])[0, 0]
                    for i in range(64)])
    full = (windows == [0, 0, 100, 100]).all(axis=1)
    assert ((iou >= 0.5) | full).all() and (iou >= 0.5).sum() > 10
    assert not (windows == random_resized_crop(0, 0, keys, h, w)).all()  # rejections happen


def test_scale_jitter_offsets_stay_inside_the_scaled_image():
    opts = detection_options(size=64, scale_jitter=(0.5, 2.0))
    g = opts.geometry(3, 1, np.arange(200), np.full(200, 100), np.full(200, 200),
                      [np.zeros((0, 4))] * 200)
    factor = g.resized[:, 1] / 64
    assert factor.min() >= 0.49 and factor.max() <= 2.01 and factor.std() > 0.2
    spare = np.maximum(g.resized - 64, 0)
    assert ((g.offset >= 0) & (g.offset <= spare)).all() and g.offset.max() > 0
    assert 0.3 < g.flip.mean() < 0.7


def test_masks_follow_the_boxes():
    """A rectangle mask resampled with the geometry covers (to a pixel) its mapped box."""
    mask = np.zeros((1, 100, 200), np.uint8)
    mask[0, 20:60, 30:110] = 1
    box = np.array([[30.0, 20.0, 110.0, 60.0]])
    opts = detection_options(size=64, scale_jitter=(0.8, 1.6))
    for key in range(12):
        g = opts.geometry(0, 0, [key], [100], [200], [box])
        mapped, keep = geo.map_boxes(box, g)
        out = geo.resample_masks(mask, g)
        assert out.shape == (1, 64, 64)
        if not keep[0]:
            continue
        ys, xs = np.nonzero(out[0])
        x1, y1, x2, y2 = mapped[0]
        assert abs(xs.min() - x1) <= 1 and abs(xs.max() + 1 - x2) <= 1
        assert abs(ys.min() - y1) <= 1 and abs(ys.max() + 1 - y2) <= 1


@pytest.mark.parametrize("option, value, match", [
    ("size", 0, "size=0"), ("size", (10, 0, 3), "size="), ("fit", "cover", "fit='cover'"),
    ("max_size", 10, "max_size=10 applies only"), ("pad_to_multiple", 0, "pad_to_multiple"),
    ("scale", (0.5, 0.2), r"scale=\(0.5, 0.2\)"), ("ratio", (0, 1), "ratio"),
    ("min_iou", 1.5, r"min_iou=1.5.*\[0, 1\]"), ("crop_attempts", 0, "crop_attempts=0"),
    ("hflip", -0.1, "hflip"), ("scale_jitter", (2.0, 1.0), "scale_jitter"),
    ("min_box_size", -1, "min_box_size=-1")])
def test_bad_options_name_option_value_and_range(option, value, match):
    with pytest.raises(ValueError, match=match):
        detection_options(**{option: value})


def test_semantic_map_paints_in_annotation_order_and_marks_padding():
    g = geo.Geometry(np.array([[0, 0, 4, 4]]), np.array([[4, 4]]), np.zeros((1, 2), int),
                     np.array([False]), (4, 6))
    masks = np.zeros((2, 4, 6), np.uint8)
    masks[0, :2, :2] = 1
    masks[1, 1:3, 1:3] = 1
    out = geo.semantic_map(masks, np.array([4, 0]), g)
    assert out.tolist() == [[5, 5, 0, 0, 255, 255], [5, 1, 1, 0, 255, 255],
                            [0, 1, 1, 0, 255, 255], [0, 0, 0, 0, 255, 255]]
    assert geo.semantic_map(masks[:0], np.zeros(0, int), g)[0].tolist() == [0] * 4 + [255] * 2
