import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.fusion import OUTPUTS, VARIABLE_OUTPUTS, build_fusion_pipeline
from tests.pipelines.graph import decodes_on_gpu, graph_ops, output_devices


@pytest.mark.parametrize("size", [None, (32, 48)])
@pytest.mark.parametrize("variable", [False, True])
def test_gpu_graph_is_defined(size, variable):
    """Defining the graph makes DALI check every operator and argument, without a GPU."""
    pipe = build_fusion_pipeline(device="gpu", batch_size=2, config=PipelineConfig(), size=size,
                                 variable=variable)
    names = VARIABLE_OUTPUTS if variable else OUTPUTS
    assert OUTPUTS[-2:] == ("imu", "imu_valid")
    assert output_devices(pipe) == ["gpu"] + ["cpu"] * (len(names) - 1)
    assert decodes_on_gpu(pipe) and ("Resize" in graph_ops(pipe)) == (size is not None)


def test_variable_clips_pad_imu_with_zeros_and_invalid():
    """Clips of 2 and 4 frames (decoded in the feeds): every time field padded to 4."""
    rng = np.random.default_rng(0)
    lengths = [2, 4]
    pipe = build_fusion_pipeline(device="cpu", batch_size=2, size=None, variable=True,
                                 config=PipelineConfig(num_threads=1))
    pipe.build()
    imu = [rng.standard_normal((n, 6)).astype(np.float32) for n in lengths]
    valid = [np.array([True, False]), np.array([True, True, False, True])]
    feeds = {"video": [np.zeros(1, np.uint8)] * 2,
             "decoded": [rng.integers(0, 255, (n, 8, 10, 3), dtype=np.uint8) for n in lengths],
             "use_dali": np.zeros(2, bool), "start_frame": np.zeros(2, np.int32),
             "sequence_length": np.array(lengths, np.int32), "stride": np.ones(2, np.int32),
             "mirror": np.zeros(2, np.int32), "imu": imu, "imu_valid": valid,
             "timestamps": [np.arange(n) / 25 + 1 for n in lengths]}
    for name, value in feeds.items():
        pipe.feed_input(name, value)
    out = dict(zip(VARIABLE_OUTPUTS, (np.array(o.as_tensor()) for o in pipe.run()), strict=True))
    assert out["frames"].shape == (2, 4, 3, 8, 10) and out["length"].tolist() == lengths
    np.testing.assert_array_equal(out["mask"], [[True, True, False, False], [True] * 4])
    np.testing.assert_array_equal(out["imu"][0], np.concatenate([imu[0], np.zeros((2, 6))]))
    np.testing.assert_array_equal(out["imu"][1], imu[1])
    np.testing.assert_array_equal(out["imu_valid"], [[True, False, False, False], valid[1]])
    np.testing.assert_array_equal(out["timestamps"][0], [1.0, 1.04, 0.0, 0.0])
    assert np.all(out["frames"][0, 2:] == 0) and np.all(out["frames"][1] != 0)


def test_bad_device_and_size():
    with pytest.raises(ValueError, match="device"):
        build_fusion_pipeline(device="tpu", batch_size=1, config=PipelineConfig(), size=None)
    with pytest.raises(ValueError, match="size"):
        build_fusion_pipeline(device="cpu", batch_size=1, config=PipelineConfig(),
                              size=(0, np.int64(3)))
