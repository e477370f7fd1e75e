import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig, available_presets, load_config
from dali_pipes.pipelines.image import build_image_pipeline
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from tests.pipelines.graph import decodes_on_gpu, graph_ops, output_devices


@pytest.mark.parametrize("preset", available_presets())
def test_gpu_graph_is_defined_with_every_preset(preset):
    """Defining the graph makes DALI check every operator name and argument, no GPU needed."""
    pipe = build_image_pipeline(device="gpu", batch_size=4, size=224, config=load_config(preset))
    assert output_devices(pipe) == ["gpu"] and decodes_on_gpu(pipe)


def test_cpu_graph_decodes_the_window_and_flips():
    rng = np.random.default_rng(0)
    pixels = photo_like(rng, 60, 80)
    data = np.frombuffer(encode_jpeg(pixels, quality=100), np.uint8)
    pipe = build_image_pipeline(device="cpu", batch_size=2, size=20, config=PipelineConfig(
        num_threads=1, prefetch_queue_depth=1, use_fast_idct=False))
    pipe.build()
    pipe.feed_input("jpegs", [data, data])
    pipe.feed_input("anchor", [np.array([10, 20], np.int32)] * 2)
    pipe.feed_input("shape", [np.array([20, 20], np.int32)] * 2)
    pipe.feed_input("mirror", [np.array(0, np.int32), np.array(1, np.int32)])
    (out,) = pipe.run()
    plain, flipped = np.array(out[0]), np.array(out[1])
    assert plain.shape == (3, 20, 20) and plain.dtype == np.float32
    np.testing.assert_allclose(plain[:, :, ::-1], flipped, atol=1e-5)
    expected = (pixels[10:30, 20:40].transpose(2, 0, 1) / 255.0 - np.array(
        [0.485, 0.456, 0.406])[:, None, None]) / np.array([0.229, 0.224, 0.225])[:, None, None]
    assert np.abs(plain - expected).mean() < 0.1  # JPEG at quality 100, same window


def test_unknown_device():
    with pytest.raises(ValueError, match="device"):
        build_image_pipeline(device="tpu", batch_size=1, size=8, config=PipelineConfig())


def test_presets_and_custom_config(tmp_path):
    assert {"default", "throughput", "low_memory", "exact"} <= set(available_presets())
    assert load_config(None) == load_config("default")
    assert load_config({"num_threads": 3}).num_threads == 3
    path = tmp_path / "mine.toml"
    path.write_text("prefetch_queue_depth = 4\nhw_decoder_load = 1\n")
    cfg = load_config(path)
    assert cfg.prefetch_queue_depth == 4 and cfg.gpu_decode.hw_decoder_load == 1.0
    assert cfg.threads() >= 1


@pytest.mark.parametrize("text,match", [
    ("bogus = 1\n", "unknown key"), ("num_threads = 'x'\n", "num_threads must be int"),
    ("hw_decoder_load = 2.0\n", "hw_decoder_load"), ("prefetch_queue_depth = 0\n", ">= 1"),
    ("= broken\n", "not valid TOML")])
def test_bad_config_files_name_the_file_and_key(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        load_config(path)
    assert "bad.toml" in str(info.value)


def test_presets_document_every_key():
    from dali_pipes.pipelines.config import config_values
    text = (load_config.__globals__["PRESET_DIR"] / "default.toml").read_text()
    for name in config_values(PipelineConfig()):
        assert f"\n{name} = " in text, name


@pytest.mark.parametrize("policy", ["randaugment", "autoaugment", "trivialaugment"])
def test_gpu_policy_graph_is_defined(policy):
    """The policy's grouped branches (and colour jitter) define on the GPU: every operator
    takes GPU images with CPU predicates and matrices."""
    from dali_pipes.recipes import ImageRecipe, Photometric, Policy
    recipe = ImageRecipe(policy=Policy(auto_augment=policy, num_ops=2, magnitude=9.0),
                         photometric=Photometric(color_jitter=(0.4, 0.4, 0.4, 0.1),
                                                 grayscale=0.2))
    pipe = build_image_pipeline(device="gpu", batch_size=4, size=224,
                                config=load_config(None), recipe=recipe)
    ops = graph_ops(pipe)
    assert output_devices(pipe) == ["gpu"] and decodes_on_gpu(pipe)
    assert {"WarpAffine", "Hsv"} <= set(ops) and ops["WarpAffine"] == {"gpu"}
