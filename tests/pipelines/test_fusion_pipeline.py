import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.fusion import OUTPUTS, build_fusion_pipeline


@pytest.mark.parametrize("size", [None, (32, 48)])
def test_gpu_graph_is_defined(size):
    """Defining the graph makes DALI check every operator and argument, without a GPU."""
    pipe = build_fusion_pipeline(device="gpu", batch_size=2, config=PipelineConfig(), size=size)
    assert pipe is not None and OUTPUTS[-2:] == ("imu", "imu_valid")


def test_bad_device_and_size():
    with pytest.raises(ValueError, match="device"):
        build_fusion_pipeline(device="tpu", batch_size=1, config=PipelineConfig(), size=None)
    with pytest.raises(ValueError, match="size"):
        build_fusion_pipeline(device="cpu", batch_size=1, config=PipelineConfig(),
                              size=(0, np.int64(3)))
