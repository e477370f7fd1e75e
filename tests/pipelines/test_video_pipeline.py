"""The video graph: defined for the GPU (checks operator arguments), run on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.geometry.clip_crops import clip_windows, source_roi
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.fusion import build_fusion_pipeline
from dali_pipes.pipelines.image import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.pipelines.video import OUTPUTS, VARIABLE_OUTPUTS, build_video_pipeline, dali_decodes
from dali_pipes.pipelines.video_frames import (
    INPUTS,
    build_frames_pipeline,
    clip_lengths,
    padding_mask,
)
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources.protocol import ClipRead, DecodedClipRead
from dali_pipes.sources.video import VideoFolderSource
from tests.pipelines.graph import decodes_on_gpu, output_devices

MEAN = np.array(IMAGENET_MEAN, np.float32)[:, None, None] * 255
STD = np.array(IMAGENET_STD, np.float32)[:, None, None] * 255


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return VideoFolderSource(small_video_folder(tmp_path_factory.mktemp("vpipe") / "v",
                                                n_videos=2), clip_length=6, stride=2)


def _feeds(source, samples, mirror):
    """samples: (index, frame indices, decode in DALI?)."""
    feeds = {name: [] for name in ("video", "decoded", "start_frame")}
    for index, frames, in_dali in samples:
        segment, start = source.read(index, ClipRead(frames)) if in_dali else (None, 0)
        feeds["video"].append(segment if in_dali else np.zeros(1, np.uint8))
        feeds["decoded"].append(np.zeros((1, 1, 1, 3), np.uint8) if in_dali
                                else source.read(index, DecodedClipRead(frames)))
        feeds["start_frame"].append(start)
    n = len(samples)
    feeds.update(use_dali=np.array([s[2] for s in samples]),
                 start_frame=np.array(feeds["start_frame"], np.int32),
                 sequence_length=np.array([len(s[1]) for s in samples], np.int32),
                 stride=np.full(n, source.stride, np.int32),
                 mirror=np.array(mirror, np.int32),
                 timestamps=[source.timestamps(i, f) for i, f, _ in samples])
    return feeds


def _run(source, samples, mirror, size=None, variable=False, roi=None):
    pipe = build_video_pipeline(device="cpu", batch_size=len(samples), size=size,
                                config=PipelineConfig(num_threads=1), variable=variable,
                                crop=roi is not None)
    pipe.build()
    feeds = _feeds(source, samples, mirror)
    if roi is not None:
        feeds["crop_start"], feeds["crop_end"] = roi
    for name, value in feeds.items():
        pipe.feed_input(name, value)
    return [np.array(out.as_tensor()) for out in pipe.run()]


@pytest.mark.parametrize("variable", [False, True])
def test_gpu_graph_is_defined_without_a_gpu(variable):
    pipe = build_video_pipeline(device="gpu", batch_size=4, size=(32, 40),
                                config=PipelineConfig(), variable=variable)
    frames_pipe = build_frames_pipeline(device="gpu", batch_size=4, size=None, clip_length=3,
                                        config=PipelineConfig(), variable=variable)
    names = VARIABLE_OUTPUTS if variable else OUTPUTS
    assert output_devices(pipe) == ["gpu"] + ["cpu"] * (len(names) - 1)
    assert output_devices(frames_pipe)[0] == "gpu"
    assert decodes_on_gpu(pipe) and decodes_on_gpu(frames_pipe)


@pytest.mark.parametrize("variable", [False, True])
def test_gpu_crop_graphs_are_defined_without_a_gpu(variable):
    for build in (build_video_pipeline, build_fusion_pipeline):
        assert build(device="gpu", batch_size=4, size=(16, 16), config=PipelineConfig(),
                     variable=variable, crop=True) is not None
    assert build_frames_pipeline(device="gpu", batch_size=4, size=(16, 16), clip_length=3,
                                 config=PipelineConfig(), variable=variable,
                                 crop=True) is not None
    with pytest.raises(ValueError, match="size must not be None"):
        build_video_pipeline(device="cpu", batch_size=1, size=None, config=PipelineConfig(),
                             crop=True)


def test_crop_graph_resizes_the_window_like_resize_then_crop(source):
    frames = np.arange(13, 25, 2)
    windows = clip_windows(0, 0, [0, 1], [48, 48], [64, 64], size=(16, 16), short_side=20,
                           train=True)
    roi = source_roi(windows, [48, 48], [64, 64], (16, 16))
    cropped, _ = _run(source, [(1, frames, True)] * 2, mirror=[0, 1], size=(16, 16), roi=roi)
    full, _ = _run(source, [(1, frames, True)], mirror=[0], size=(20, 26))
    assert cropped.shape == (2, 6, 3, 16, 16) and tuple(windows[0, :2]) == (20, 26)
    for row, (_, _, top, left) in enumerate(windows.tolist()):
        expected = full[0][..., top:top + 16, left:left + 16]
        expected = expected[..., ::-1] if row == 1 else expected
        assert np.abs(cropped[row] - expected).mean() * STD.mean() < 1.0  # < 1 level


def test_cpu_graph_decodes_a_vp9_segment_like_pyav(source):
    frames = np.arange(13, 25, 2)  # starts after the keyframe at 12
    frames_out, ts = _run(source, [(1, frames, True), (1, frames, False)], mirror=[0, 1])
    assert frames_out.shape == (2, 6, 3, 48, 64) and frames_out.dtype == np.float32
    np.testing.assert_array_equal(ts[0], source.timestamps(1, frames))
    pixels = frames_out * STD + MEAN
    expected = source.read(1, DecodedClipRead(frames)).transpose(0, 3, 1, 2).astype(np.float32)
    assert np.abs(pixels[0] - expected).mean() < 3.0  # DALI's YUV->RGB differs slightly
    np.testing.assert_allclose(pixels[1], expected[..., ::-1], atol=1e-3)  # flipped PyAV


def test_edge_padding_repeats_the_last_frame(source):
    n = source.info(0).frame_count
    frames = np.minimum(n - 3 + 2 * np.arange(6), n - 1)
    out, _ = _run(source, [(0, frames, True)], mirror=[0], size=(16, 16))
    assert out.shape == (1, 6, 3, 16, 16)
    for t in range(2, 6):
        np.testing.assert_array_equal(out[0, t], out[0, 1])


def test_which_codecs_the_graph_decodes():
    assert dali_decodes("vp9", "cpu") and dali_decodes("mjpeg", "cpu")
    assert not dali_decodes("h264", "cpu") and dali_decodes("h264", "gpu")
    assert not dali_decodes("mpeg4", "gpu")


def test_bad_size_is_rejected():
    with pytest.raises(ValueError, match="size"):
        build_video_pipeline(device="cpu", batch_size=1, size=(0, 4), config=PipelineConfig())


def _check_padded(frames, ts, length, mask, lengths):
    assert length.dtype == np.int64 and length.tolist() == lengths
    assert mask.dtype == bool and mask.shape == (len(lengths), max(lengths))
    np.testing.assert_array_equal(mask, np.arange(max(lengths)) < length[:, None])
    assert frames.shape[:2] == ts.shape == mask.shape
    assert np.all(frames[~mask] == 0) and np.all(ts[~mask] == 0)
    assert np.all(np.abs(frames[mask]).reshape(mask.sum(), -1).sum(1) > 0)


def test_variable_clips_are_padded_to_the_longest_decoded_one(source):
    long, short = np.arange(13, 25, 2), np.arange(0, 5, 2)  # 6 and 3 frames
    samples = [(1, short, True), (1, long, False), (0, long[:4], True), (0, short, False)]
    frames, ts, length, mask = _run(source, samples, mirror=[0, 0, 0, 0], variable=True)
    _check_padded(frames, ts, length, mask, [3, 6, 4, 3])
    for row, (index, clip, _) in enumerate(samples):
        n = len(clip)
        np.testing.assert_array_equal(ts[row, :n], source.timestamps(index, clip))
        expected = source.read(index, DecodedClipRead(clip)).transpose(0, 3, 1, 2)
        expected = expected.astype(np.float32)
        assert np.abs(frames[row, :n] * STD + MEAN - expected).mean() < 3.0
    assert len(VARIABLE_OUTPUTS) == 4


def test_frames_graph_decodes_every_frame_of_the_batch_in_one_decoder():
    rng = np.random.default_rng(0)
    jpegs = [np.frombuffer(encode_jpeg(photo_like(rng, 24, 32)), np.uint8) for _ in range(3)]
    pipe = build_frames_pipeline(device="cpu", batch_size=2, size=None, clip_length=3,
                                 config=PipelineConfig(num_threads=1), variable=True)
    pipe.build()  # clip 0: 3 frames, clip 1: 2 frames (pad="variable" feeds only those)
    feeds = {"jpegs": jpegs + jpegs[:2], "mirror": np.zeros(5, np.int32),
             "timestamps": np.array([0.1, 0.2, 0.3, 0.1, 0.2]),
             "clip": np.array([0, 0, 0, 1, 1], np.int32)}
    for name in INPUTS:
        pipe.feed_input(name, feeds[name])
    frames, ts, clip = (np.array(out.as_tensor()) for out in pipe.run())
    assert frames.shape == (5, 3, 24, 32) and clip.tolist() == [0, 0, 0, 1, 1]
    np.testing.assert_array_equal(frames[3:], frames[:2])  # same JPEGs, same pixels
    np.testing.assert_array_equal(ts, feeds["timestamps"])
    lengths = clip_lengths(clip, 2)
    assert lengths.tolist() == [3, 2] and padding_mask(lengths).tolist() == [
        [True, True, True], [True, True, False]]
