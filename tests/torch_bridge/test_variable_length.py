"""pad="variable": clips keep the frames their video has; batches are padded, with length/mask.

Videos of 5, 9 and 20 frames with clip_length 8 and stride 2 (span 15): the first two are
shorter than a clip (3 and 5 real frames), the third is long enough (8).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from dali_pipes.align import align_to_frames
from dali_pipes.formats.imu import imu_path_for, read_imu
from dali_pipes.formats.video import decode_frames_pyav, probe_video
from dali_pipes.geometry.clips import clip_lengths
from dali_pipes.geometry.draws import flips
from dali_pipes.pipelines.image import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.sample_data.sample_fusion import small_fusion_folder
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources.frames import TIMESTAMPS, extract_tree, frame_name
from dali_pipes.sources.fusion import FusionFolderSource
from dali_pipes.sources.video import VideoFolderSource
from tests.conftest import BACKENDS
from torch_bridge import SampleError, make_loader, registry
from torch_bridge.engines._collate import pad_batch

T, STRIDE, COUNTS = 8, 2, (5, 9, 20)
MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1) * 255
STD = torch.tensor(IMAGENET_STD).view(3, 1, 1) * 255


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    return small_video_folder(tmp_path_factory.mktemp("varlen") / "v", n_videos=3,
                              frames=COUNTS, size=(32, 24))


@pytest.fixture(scope="module")
def frame_tree(tmp_path_factory, videos):
    dst = tmp_path_factory.mktemp("varlen_frames") / "f"
    assert not extract_tree(videos, dst, progress=False).failed
    return dst


def _loader(data, backend, modality="video", **kw):
    kw.setdefault("batch_size", 3)
    for name, value in (("clip_length", T), ("stride", STRIDE), ("size", None),
                        ("pad", "variable"), ("seed", 3)):
        kw.setdefault(name, value)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader(modality, data, backend=backend, **kw)


def _batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def _expected_clip(src, index, seed=3):
    """The clip's real frame indices, from the probe's frame count and the clip start."""
    clip = src.clip_indices(seed, 0, [index], train=True)[0]
    n = len(src.all_timestamps(index)) if hasattr(src, "all_timestamps") else \
        probe_video(src.path(index)).frame_count
    return clip[:int(clip_lengths(clip[0], n, T, STRIDE))]


def _check_padding(batch):
    """length/mask agree, the batch is as long as its longest clip, padding is exactly 0."""
    length, mask = batch["length"], batch["mask"]
    assert length.dtype == torch.int64 and mask.dtype == torch.bool
    assert batch["frames"].shape[1] == int(length.max()) == mask.shape[1]
    assert torch.equal(mask, torch.arange(mask.shape[1])[None] < length[:, None])
    assert torch.all(batch["frames"][~mask] == 0) and torch.all(batch["timestamps"][~mask] == 0)
    assert torch.all(batch["frames"][mask].flatten(1).abs().sum(1) > 0)
    if "imu" in batch:
        assert torch.all(batch["imu"][~mask] == 0) and not batch["imu_valid"][~mask].any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_variable_batches_follow_the_schema(videos, backend):
    (batch,) = _batches(_loader(videos, backend))
    schema = registry.get("video").schema(variable=True)
    assert set(batch) == set(schema)
    for name, (dtype, layout) in schema.items():
        assert batch[name].dtype == getattr(torch, dtype) and batch[name].dim() == len(layout)


@pytest.mark.parametrize("backend", BACKENDS)
def test_video_lengths_follow_the_probe(videos, backend):
    (batch,) = _batches(_loader(videos, backend))
    _check_padding(batch)
    src = VideoFolderSource(videos, clip_length=T, stride=STRIDE)
    assert sorted(batch["length"].tolist()) == [3, 5, 8]
    for row, index in enumerate(batch["index"].tolist()):
        clip = _expected_clip(src, index)
        n = len(clip)
        assert batch["length"][row] == n
        info = probe_video(src.path(index))
        np.testing.assert_array_equal(batch["timestamps"][row, :n].numpy(),
                                      info.timestamps[clip])
        expected = torch.from_numpy(decode_frames_pyav(src.path(index), clip)[0])
        expected = expected.permute(0, 3, 1, 2).float()
        pixels = batch["frames"][row, :n] * STD + MEAN
        if flips(3, 0, np.array([index]))[0]:
            pixels = pixels.flip(-1)
        assert (pixels - expected).abs().mean() < 3.0


def test_video_backends_agree(videos):
    dali = _batches(_loader(videos, "dali", batch_size=2))
    ref = _batches(_loader(videos, "torch", batch_size=2))
    assert len(dali) == len(ref) == 2
    for d, r in zip(dali, ref, strict=True):
        assert set(d) == set(r)
        for name in ("index", "length", "mask", "timestamps", "label"):
            assert torch.equal(d[name], r[name]), name
        assert d["frames"].shape == r["frames"].shape
        assert ((d["frames"] - r["frames"]) * STD).abs().mean() < 3.0  # levels of 255
        _check_padding(d)
        _check_padding(r)


def test_pyav_fallback_codec_pads_like_dali_decoding(tmp_path):
    small_video_folder(tmp_path / "v", n_videos=2, frames=(5, 20), size=(32, 24),
                       codec="mpeg4")  # no CPU decoder in DALI: decoded by PyAV in the feeds
    small_video_folder(tmp_path / "v", n_videos=1, frames=(9,), size=(32, 24), seed=1)
    dali = _batches(_loader(tmp_path / "v", "dali", shuffle=False))[0]
    ref = _batches(_loader(tmp_path / "v", "torch", shuffle=False))[0]
    assert dali["length"].tolist() == ref["length"].tolist() == [3, 5, 8]
    for name in ("mask", "timestamps"):
        assert torch.equal(dali[name], ref[name]), name
    assert ((dali["frames"] - ref["frames"]) * STD).abs().mean() < 3.0
    _check_padding(dali)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_folders_lengths_follow_the_timestamps(frame_tree, backend):
    from dali_pipes.sources.video_frames import FrameFolderSource
    (batch,) = _batches(_loader(frame_tree, backend))
    _check_padding(batch)
    assert batch["frames"].shape[-2:] == (24, 32)  # size=None keeps the native resolution
    src = FrameFolderSource(frame_tree, clip_length=T, stride=STRIDE)
    for row, index in enumerate(batch["index"].tolist()):
        clip = _expected_clip(src, index)
        assert batch["length"][row] == len(clip)
        np.testing.assert_array_equal(batch["timestamps"][row, :len(clip)].numpy(),
                                      np.load(f"{src.path(index)}/{TIMESTAMPS}")[clip])


def test_frame_folder_backends_agree(frame_tree):
    (d,) = _batches(_loader(frame_tree, "dali", size=(16, 20)))
    (r,) = _batches(_loader(frame_tree, "torch", size=(16, 20)))
    for name in ("index", "length", "mask", "timestamps"):
        assert torch.equal(d[name], r[name]), name
    assert d["frames"].shape == r["frames"].shape == (3, 8, 3, 16, 20)
    assert (d["frames"] - r["frames"]).abs().mean() < 0.06  # as test_video_frames.py
    _check_padding(r)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fusion_imu_is_padded_with_zeros_and_invalid(tmp_path_factory, backend):
    data = small_fusion_folder(tmp_path_factory.mktemp("varfusion") / "f", n_videos=3,
                               frames=COUNTS, gap=None)
    (batch,) = _batches(_loader(data, backend, "fusion", imu_offset=0.25))
    _check_padding(batch)
    assert sorted(batch["length"].tolist()) == [3, 5, 8]
    src = FusionFolderSource(data)
    for row, index in enumerate(batch["index"].tolist()):
        n = int(batch["length"][row])
        stream = read_imu(imu_path_for(src.path(index)))
        values, valid = align_to_frames(batch["timestamps"][row, :n].numpy(), stream.t,
                                        stream.values, offset=0.25)
        assert torch.equal(batch["imu"][row, :n], torch.from_numpy(values.astype(np.float32)))
        assert torch.equal(batch["imu_valid"][row, :n], torch.from_numpy(valid))


def test_default_pad_keeps_fixed_length_clips(videos):
    for backend in BACKENDS:
        (batch,) = _batches(_loader(videos, backend, pad="repeat_last"))
        assert "length" not in batch and "mask" not in batch
        assert batch["frames"].shape[1] == T
    with pytest.raises(ValueError, match="pad must be one of"):
        make_loader("video", videos, pad="none")


def _mixed_tree(tmp_path, frame_tree, *, within_clip: bool):
    """A copy of the frame tree where one folder's frames (or one frame) are 12x16."""
    root = tmp_path / "mixed"
    shutil.copytree(frame_tree, root)
    folder = root / "class_1" / "vid_0001"  # sample 1 in listing order
    small = encode_jpeg(photo_like(np.random.default_rng(0), 12, 16))
    names = [frame_name(0)] if within_clip else [p.name for p in folder.glob("*.jpg")]
    for name in names:
        (folder / name).write_bytes(small)
    return root


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_resolution_mismatch_across_clips_names_the_folders(tmp_path, frame_tree,
                                                                   backend):
    root = _mixed_tree(tmp_path, frame_tree, within_clip=False)
    with pytest.raises(ValueError, match=r"(size=None|differ in shape).*vid_0000.*vid_0001"):
        list(_loader(root, backend, shuffle=False, pad="repeat_last"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_resolution_mismatch_within_a_clip_names_the_files(tmp_path, frame_tree,
                                                                  backend):
    root = _mixed_tree(tmp_path, frame_tree, within_clip=True)
    loader = _loader(root, backend, shuffle=False, train=False)
    with pytest.raises(SampleError, match=r"vid_0001.*frame_000000\.jpg is 12x16.*24x32"):
        list(loader)


def test_collate_names_samples_whose_other_axes_differ():
    samples = [{"frames": torch.zeros(3, 3, 4, 4, dtype=torch.uint8)},
               {"frames": torch.zeros(2, 3, 4, 5, dtype=torch.uint8)}]
    with pytest.raises(ValueError, match=r"'frames'.*0: a.mp4 \(3, 3, 4, 4\).*1: b.mp4"):
        pad_batch(samples, ["frames"], ["0: a.mp4", "1: b.mp4"])
    samples[1]["frames"] = torch.ones(2, 3, 4, 4, dtype=torch.uint8)
    out = pad_batch(samples, ["frames"], ["0: a.mp4", "1: b.mp4"])
    assert out["length"].tolist() == [3, 2] and out["frames"][1, 2].sum() == 0
    assert out["frames"][1, :2].min() == 1


def test_skipped_sample_pads_to_the_kept_clips(tmp_path, videos):
    root = tmp_path / "v"
    shutil.copytree(videos, root)
    bad = root / "class_2" / "vid_0002.webm"  # the 20-frame video, the only full clip
    bad.write_bytes(bad.read_bytes()[:40])
    got = {}
    for backend in BACKENDS:
        (batch,) = _batches(_loader(root, backend, on_error="skip", shuffle=False))
        _check_padding(batch)
        got[backend] = batch
    assert got["dali"]["length"].tolist() == got["torch"]["length"].tolist() == [3, 5]
    assert got["dali"]["frames"].shape == got["torch"]["frames"].shape == (2, 5, 3, 24, 32)
    assert torch.equal(got["dali"]["mask"], got["torch"]["mask"])
