"""make_loader("video", ...): the loader contract on video files, and both backends against
PyAV decodes and the probe."""
from __future__ import annotations

import re

import av
import numpy as np
import pytest
import torch

from dali_pipes.formats.video import decode_frames_pyav, probe_video
from dali_pipes.geometry.draws import flips
from dali_pipes.sample_data.sample_video import small_video_folder, synthetic_frames, write_video
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.sources.video import VideoFolderSource
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import LoaderContract, truncate

MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1) * 255
STD = torch.tensor(IMAGENET_STD).view(3, 1, 1) * 255
T, STRIDE = 6, 2


class TestVideoContract(LoaderContract):
    kind, main, sample_shape = "video", "frames", (4, 3, 16, 16)
    exact = ("index", "label", "timestamps")
    tolerance = 0.06  # normalized units: DALI's and swscale's YUV->RGB and resizers differ

    def break_samples(self, root, modality):
        truncate(modality.path(1))
        return {1}, re.escape(modality.path(1)), ""


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    return small_video_folder(tmp_path_factory.mktemp("video") / "v", n_videos=5)


def _loader(data, backend, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("clip_length", T)
    kw.setdefault("stride", STRIDE)
    kw.setdefault("size", None)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("video", data, backend=backend, **kw)


def _all(loader):
    batches = list(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _pixels(frames):
    return frames * STD + MEAN  # (..., 3, H, W) back to 0..255


def _pyav(path, frames):
    return torch.from_numpy(decode_frames_pyav(path, frames)[0]).permute(0, 3, 1, 2).float()


def test_non_square_size(videos, backend):
    batch = next(iter(_loader(videos, backend, size=(24, 32))))
    assert batch["frames"].shape == (4, T, 3, 24, 32) and batch["timestamps"].shape == (4, T)


def test_every_index_once_with_clips_per_video(videos, backend):
    loader = _loader(videos, backend, clips_per_video=2, size=16)
    seen = _all(loader)["index"].tolist()
    assert len(loader) == 3 and sorted(seen) == list(range(10))


def test_backends_agree_and_match_pyav_and_the_probe(videos):
    dali = _all(_loader(videos, "dali", seed=3))
    ref = _all(_loader(videos, "torch", seed=3))
    assert torch.equal(dali["index"], ref["index"])
    assert torch.equal(dali["timestamps"], ref["timestamps"])
    assert (_pixels(dali["frames"]) - _pixels(ref["frames"])).abs().mean() < 3.0
    src = VideoFolderSource(videos, clip_length=T, stride=STRIDE)
    clips = src.clip_indices(3, 0, dali["index"].numpy(), train=True)
    mirror = flips(3, 0, dali["index"].numpy())
    assert 0 < mirror.sum() < len(mirror)
    for i, index in enumerate(dali["index"].tolist()):
        info = probe_video(src.path(index))
        np.testing.assert_array_equal(dali["timestamps"][i].numpy(), info.timestamps[clips[i]])
        expected = _pyav(src.path(index), clips[i])
        expected = expected.flip(-1) if mirror[i] else expected  # one flip for every frame
        assert (_pixels(dali["frames"][i]) - expected).abs().mean() < 3.0
        torch.testing.assert_close(_pixels(ref["frames"][i]), expected, atol=1e-3, rtol=0)


def test_eval_clips_are_centred_and_unflipped(videos, backend):
    out = _all(_loader(videos, backend, train=False, shuffle=False))
    src = VideoFolderSource(videos)
    for i in range(len(out["index"])):
        info = probe_video(src.path(i))
        start = (info.frame_count - ((T - 1) * STRIDE + 1)) // 2
        np.testing.assert_array_equal(out["timestamps"][i].numpy(),
                                      info.timestamps[start + STRIDE * np.arange(T)])
        expected = _pyav(src.path(i), start + STRIDE * np.arange(T))
        assert (_pixels(out["frames"][i]) - expected).abs().mean() < 3.0


def test_short_video_repeats_its_last_frame(tmp_path, backend):
    write_video(tmp_path / "a" / "short.webm",
                synthetic_frames(np.random.default_rng(1), 5, 32, 24))
    out = _all(_loader(tmp_path, backend, clip_length=8, stride=1))
    ts = out["timestamps"][0].numpy()
    np.testing.assert_allclose(ts, np.minimum(np.arange(8), 4) / 25)
    frames = out["frames"][0]
    for t in range(5, 8):
        assert torch.equal(frames[t], frames[4])


def test_h264_loads_on_cpu_through_the_fallback(tmp_path):
    if "libx264" not in av.codecs_available:
        pytest.skip("PyAV has no libx264 encoder")
    small_video_folder(tmp_path / "v", n_videos=2, codec="libx264")
    small_video_folder(tmp_path / "v", n_videos=1, seed=4)  # a VP9 file in the same batch
    dali = _all(_loader(tmp_path / "v", "dali", seed=1))
    ref = _all(_loader(tmp_path / "v", "torch", seed=1))
    assert sorted(dali["index"].tolist()) == [0, 1, 2]
    assert torch.equal(dali["timestamps"], ref["timestamps"])
    assert (_pixels(dali["frames"]) - _pixels(ref["frames"])).abs().mean() < 3.0


def test_multiple_folders_and_native_resolution_mismatch(tmp_path):
    a = small_video_folder(tmp_path / "a", n_videos=2)
    b = small_video_folder(tmp_path / "b", n_videos=2, size=(32, 24))
    out = _all(_loader([a, b], "torch", shuffle=False, batch_size=2, size=16))
    assert out["source_id"].tolist() == [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"size=None.*vid_0000\.webm is 48x64.*24x32"):
        list(_loader([a, b], "dali", shuffle=False, batch_size=4))
    with pytest.raises(ValueError, match=r"differ in shape.*vid_0000\.webm.*48, 64\)"):
        list(_loader([a, b], "torch", shuffle=False, batch_size=4))


def test_bad_options_name_the_option(videos):
    for option, value in (("size", 0), ("size", (3,)), ("clip_length", 0), ("stride", -1),
                          ("clips_per_video", 0), ("train", "yes")):
        with pytest.raises(ValueError, match=option):
            make_loader("video", videos, **{option: value})
