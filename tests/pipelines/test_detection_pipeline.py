"""The detection graph on its own: defined for the GPU (DALI checks every argument), and on
the CPU the canvas slice pads with 0 after normalisation and targets pad to the batch."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig, available_presets, load_config
from dali_pipes.pipelines.detection import build_detection_pipeline, outputs
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from tests.pipelines.graph import decodes_on_gpu, output_devices


@pytest.mark.parametrize("preset", available_presets())
@pytest.mark.parametrize("masks", [False, True])
def test_gpu_graph_is_defined(preset, masks):
    pipe = build_detection_pipeline(device="gpu", batch_size=2, canvas=(64, 48),
                                    config=load_config(preset), masks=masks, semantic=masks)
    assert output_devices(pipe) == ["gpu"] + ["cpu"] * (len(outputs(masks, masks)) - 1)
    assert decodes_on_gpu(pipe)


def test_cpu_graph_pads_canvas_and_targets():
    data = np.frombuffer(encode_jpeg(photo_like(np.random.default_rng(0), 40, 60)), np.uint8)
    pipe = build_detection_pipeline(device="cpu", batch_size=2, canvas=(32, 32), masks=True,
                                    config=PipelineConfig(num_threads=1,
                                                          prefetch_queue_depth=1))
    pipe.build()
    boxes = [np.array([[1, 2, 3, 4]], np.float32), np.zeros((0, 4), np.float32)]
    feeds = {"images": [data, data], "anchor": np.zeros((2, 2), np.int32),
             "shape": np.array([[40, 60]] * 2, np.int32),
             "resized": np.array([[20, 30], [20, 30]], np.float32),
             "offset": np.zeros((2, 2), np.int32), "mirror": np.array([0, 1], np.int32),
             "boxes": boxes, "labels": [np.array([2]), np.zeros(0, np.int64)],
             "box_valid": [np.ones(1, bool), np.zeros(0, bool)],
             "iscrowd": [np.zeros(1, bool), np.zeros(0, bool)],
             "num_boxes": np.array([1, 0]), "dropped_boxes": np.array([0, 3]),
             "masks": [np.ones((1, 32, 32), np.uint8), np.zeros((0, 32, 32), np.uint8)]}
    for name, value in feeds.items():
        pipe.feed_input(name, value)
    out = dict(zip(outputs(True), (o.as_array() for o in pipe.run()), strict=True))
    image = out["image"]
    assert image.shape == (2, 3, 32, 32)
    assert (image[:, :, 20:, :] == 0).all() and (image[:, :, :, 30:] == 0).all()
    assert (image[:, :, :20, :30] != 0).mean() > 0.9
    np.testing.assert_array_equal(image[1, :, :20, :30], image[0, :, :20, :30][..., ::-1])
    assert out["boxes"].tolist() == [[[1, 2, 3, 4]], [[0, 0, 0, 0]]]
    assert out["labels"].tolist() == [[2], [0]] and out["box_valid"].tolist() == [[True],
                                                                                   [False]]
    assert out["masks"].shape == (2, 1, 32, 32) and out["masks"][1].sum() == 0
    assert out["num_boxes"].tolist() == [1, 0] and out["dropped_boxes"].tolist() == [0, 3]
