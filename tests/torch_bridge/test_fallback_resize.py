"""Clips decoded by the PyAV fallback are resized in the feed with the torch path's kernel:
the DALI backend then gives the torch path's pixels for them (DALI's own resize is used
only for the clips it decodes)."""
import numpy as np
import pytest
import torch

from dali_pipes.sample_data.sample_video import small_video_folder
from torch_bridge import make_loader
from torch_bridge.modalities.clip_resize import resize_clip


@pytest.fixture(scope="module")
def h264_folder(tmp_path_factory):
    return small_video_folder(tmp_path_factory.mktemp("h264"), n_videos=4, codec="libx264",
                              size=(96, 64))


def _batches(folder, backend):
    loader = make_loader("video", folder, backend=backend, device="cpu", batch_size=2,
                         seed=4, clip_length=4, size=(32, 40), shuffle=False,
                         config={"py_num_workers": 0} if backend == "dali" else None)
    return list(loader)


def test_pyav_clips_match_the_torch_path(h264_folder):
    dali, ref = _batches(h264_folder, "dali"), _batches(h264_folder, "torch")
    assert len(dali) == len(ref) == 2
    for a, b in zip(dali, ref, strict=True):
        assert a["frames"].shape == b["frames"].shape == (2, 4, 3, 32, 40)
        # the same pixels up to float rounding (before: DALI's resize, mean difference 0.0035)
        assert (a["frames"] - b["frames"]).abs().max() < 1e-5
        assert torch.equal(a["timestamps"], b["timestamps"])


def test_resize_clip_keeps_native_size_and_layout():
    clip = np.random.default_rng(0).integers(0, 255, (3, 20, 30, 3), dtype=np.uint8)
    assert resize_clip(clip, None) is clip and resize_clip(clip, (20, 30)) is clip
    out = resize_clip(clip, (10, 15))
    assert out.shape == (3, 10, 15, 3) and out.dtype == np.uint8 and out.flags.c_contiguous
