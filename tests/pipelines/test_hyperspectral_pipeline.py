"""The hyperspectral graph: defined for the GPU, exact against numpy on the CPU backend."""
import itertools

import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig, available_presets, load_config
from dali_pipes.pipelines.hyperspectral import build_hyperspectral_pipeline, inputs
from tests.pipelines.graph import graph_ops, output_devices

CONFIG = PipelineConfig(num_threads=1, prefetch_queue_depth=1)
GROUP = list(itertools.product([0, 1], [0, 1], range(4)))  # (flip_h, flip_v, k): 16 cases


@pytest.mark.parametrize("augment,normalize", list(itertools.product([True, False], repeat=2)))
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint16, np.float64])
def test_gpu_graph_is_defined(augment, normalize, dtype):
    """Defining makes DALI check every operator name and argument, no GPU needed."""
    pipe = build_hyperspectral_pipeline(device="gpu", batch_size=4, config=CONFIG,
                                        dtype=dtype, augment=augment, normalize=normalize)
    ops = graph_ops(pipe)
    assert output_devices(pipe) == ["gpu"]
    assert ("Flip" in ops) == augment


@pytest.mark.parametrize("preset", available_presets())
def test_gpu_graph_with_every_preset(preset):
    assert build_hyperspectral_pipeline(device="gpu", batch_size=2, config=load_config(preset))


def _numpy_reference(x, mean, std, flip_h, flip_v, k):
    out = (x.astype(np.float32) - mean) / std
    if flip_v:
        out = out[:, ::-1, :]
    if flip_h:
        out = out[:, :, ::-1]
    return np.rot90(out, k, axes=(1, 2))


def _run(pipe, feeds):
    pipe.build()
    for name, value in feeds.items():
        pipe.feed_input(name, value)
    (out,) = pipe.run()
    return [np.array(out[i]) for i in range(len(out))], out.layout()


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_cpu_graph_equals_numpy_for_every_flip_and_turn(dtype):
    rng = np.random.default_rng(0)
    n = len(GROUP)
    cube = (rng.integers(-3000, 3000, size=(n, 6, 7, 7)) / (1 if dtype == np.int16 else 3.0))
    cube = cube.astype(dtype)
    mean = rng.normal(size=(n, 6, 1, 1)).astype(np.float32)
    std = rng.uniform(0.5, 3.0, size=(n, 6, 1, 1)).astype(np.float32)
    flip_h, flip_v, k = (np.array(c, np.int32) for c in zip(*GROUP, strict=True))
    pipe = build_hyperspectral_pipeline(device="cpu", batch_size=n, config=CONFIG, dtype=dtype,
                                        normalize=True)
    got, layout = _run(pipe, dict(cube=cube, mean=mean, std=std, flip_h=flip_h,
                                  flip_v=flip_v, k=k))
    assert layout == "CHW"
    for i in range(n):
        expected = _numpy_reference(cube[i], mean[i], std[i], flip_h[i], flip_v[i], k[i])
        assert got[i].dtype == np.float32
        np.testing.assert_array_equal(got[i], expected, err_msg=str(GROUP[i]))
    assert len({g.tobytes() for g in got}) == 16  # 16 distinct inputs, so distinct outputs


def test_plain_graph_only_casts():
    cube = np.arange(2 * 3 * 5 * 5, dtype=np.uint16).reshape(2, 3, 5, 5)
    pipe = build_hyperspectral_pipeline(device="cpu", batch_size=2, config=CONFIG,
                                        dtype=np.uint16, augment=False)
    got, layout = _run(pipe, {"cube": cube})
    assert layout == "CHW"
    np.testing.assert_array_equal(np.stack(got), cube.astype(np.float32))


def test_input_names_follow_options():
    assert inputs(augment=False, normalize=False) == ("cube",)
    assert inputs(augment=True, normalize=True) == ("cube", "mean", "std", "flip_h", "flip_v",
                                                    "k")


def test_unknown_device():
    with pytest.raises(ValueError, match="device"):
        build_hyperspectral_pipeline(device="tpu", batch_size=1, config=CONFIG)
