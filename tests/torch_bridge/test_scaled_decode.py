"""Video frames scaled in the PyAV decoder (`scaled_decode`): the same frames and timestamps
as full-size decoding, pixels close to the torchvision resize, both backends equal, and
decoder threads sized to the cores given."""
import numpy as np
import pytest
import torch

from dali_pipes.formats.video import decode_frames_pyav, decoder_threads, probe_video
from dali_pipes.sample_data.sample_video import small_video_folder
from torch_bridge import make_loader
from torch_bridge.engines._autoworkers import rank_cores
from torch_bridge.modalities.clip_resize import resize_clip
from torch_bridge.modalities.video import VideoModality


@pytest.fixture(scope="module")
def h264_folder(tmp_path_factory):
    return small_video_folder(tmp_path_factory.mktemp("h264s"), n_videos=4, codec="libx264",
                              size=(96, 64))


def _first_file(folder):
    return sorted(folder.rglob("*.mp4"))[0]


def test_scaled_frames_keep_indices_and_timestamps_and_stay_close(h264_folder):
    path = _first_file(h264_folder)
    info = probe_video(path)
    index = np.array([5, 3, 3, 9, 20])
    full, stamps = decode_frames_pyav(path, index, info=info)
    small, small_stamps = decode_frames_pyav(path, index, info=info, scale=(24, 40))
    assert small.shape == (5, 24, 40, 3) and small.dtype == np.uint8
    assert np.array_equal(stamps, small_stamps)
    assert np.array_equal(small[1], small[2])  # a repeated index is the same frame
    diff = np.abs(small.astype(int) - resize_clip(full, (24, 40)).astype(int))
    # the frames are the same ones (the next frame differs by more on average)
    assert diff.mean() < 3 and np.percentile(diff, 99) < 12
    other = decode_frames_pyav(path, index + 1, info=info, scale=(24, 40))[0]
    assert np.abs(other.astype(int) - resize_clip(full, (24, 40)).astype(int)).mean() > \
        diff.mean()


def test_threads_give_identical_frames_and_are_checked(h264_folder):
    path = _first_file(h264_folder)
    index = np.arange(2, 24, 3)
    one = decode_frames_pyav(path, index, threads=1)
    two = decode_frames_pyav(path, index, threads=2)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    with pytest.raises(ValueError, match="threads"):
        decode_frames_pyav(path, index, threads=0)
    with pytest.raises(ValueError, match="scale"):
        decode_frames_pyav(path, index, scale=(0, 10))


def test_decoder_threads_follow_the_cores_given(h264_folder, monkeypatch):
    assert decoder_threads(8) == 8 and decoder_threads(8, 2) == 4
    assert decoder_threads(2, 4) == 1 and decoder_threads(1, 0) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    auto = VideoModality(h264_folder, seed=0, size=16)
    assert auto._threads() == rank_cores()
    assert VideoModality(h264_folder, seed=0, size=16, decode_threads=3)._threads() == 3
    with pytest.raises(ValueError, match="decode_threads"):
        VideoModality(h264_folder, seed=0, size=16, decode_threads=-1)


def _batches(folder, backend, **options):
    loader = make_loader("video", folder, backend=backend, device="cpu", batch_size=2,
                         seed=4, clip_length=4, stride=2, size=(32, 40), shuffle=False,
                         config={"py_num_workers": 0} if backend == "dali" else None,
                         **options)
    return list(loader)


@pytest.mark.parametrize("resize", ["squash", "short_side"])
def test_backends_agree_with_scaled_decode(h264_folder, resize):
    options = {"resize": resize, "scaled_decode": True}
    dali, ref = _batches(h264_folder, "dali", **options), _batches(h264_folder, "torch",
                                                                    **options)
    exact = _batches(h264_folder, "torch", resize=resize, scaled_decode=False)
    assert _batches(h264_folder, "torch", resize=resize)[0]["frames"].equal(ref[0]["frames"])
    assert len(dali) == len(ref) == len(exact) == 2
    for a, b, c in zip(dali, ref, exact, strict=True):
        assert a["frames"].shape == b["frames"].shape == (2, 4, 3, 32, 40)
        assert (a["frames"] - b["frames"]).abs().max() < 1e-5
        assert torch.equal(a["timestamps"], b["timestamps"])
        assert torch.equal(b["timestamps"], c["timestamps"])
        assert torch.equal(b["index"], c["index"])
        # normalized units: about 0.017 per grey level; the scaled pixels are within about
        # 2 levels on average on these small frames
        assert 0 < (b["frames"] - c["frames"]).abs().mean() < 0.05


@pytest.fixture(scope="module")
def h264_long(tmp_path_factory):
    from dali_pipes.sample_data.sample_video import synthetic_frames, write_video
    frames = synthetic_frames(np.random.default_rng(1), 64, 64, 48, label=1)
    return write_video(tmp_path_factory.mktemp("h264l") / "long.mp4", frames,
                       codec="libx264", gop=32)


def _counting(monkeypatch):
    from dali_pipes.formats import video
    decoded, original = [], video._decoded_frames

    def counting(container, stream, *args):
        for frame in original(container, stream, *args):
            decoded.append(frame.pts)
            yield frame
    monkeypatch.setattr(video, "_decoded_frames", counting)
    return decoded


@pytest.mark.parametrize("threads", [1, 2])
def test_unused_non_reference_frames_are_skipped_with_the_same_result(h264_long, threads,
                                                                      monkeypatch):
    info = probe_video(h264_long)
    decoded = _counting(monkeypatch)
    for start, stride in [(0, 1), (5, 2), (37, 3), (40, 1), (20, 2)]:
        index = np.arange(start, min(start + 8 * stride, info.frame_count), stride)
        decoded.clear()
        full = decode_frames_pyav(h264_long, index, info=info, skip_unused=False,
                                  threads=threads)
        every = len(decoded)
        decoded.clear()
        skipped = decode_frames_pyav(h264_long, index, info=info, threads=threads)
        assert np.array_equal(full[0], skipped[0]) and np.array_equal(full[1], skipped[1])
        assert len(decoded) <= every
        assert set(info.pts[index].tolist()) <= set(decoded)
    decoded.clear()
    decode_frames_pyav(h264_long, np.arange(40, 56, 2), info=info, threads=threads)
    assert len(decoded) < 56 - info.keyframe_at_or_before(40)  # some frames were not decoded
