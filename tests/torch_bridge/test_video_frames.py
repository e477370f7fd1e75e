"""Frame-folder video path: offline extraction command + make_loader("video", frame tree),
and the loader contract on frame folders."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from dali_pipes.formats.video import probe_video
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources.frames import COMPLETE, TIMESTAMPS, frame_name
from dali_pipes.sources.video_frames import is_frame_folder_tree
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import LoaderContract, garbage_jpegs

OPTS = dict(clip_length=4, stride=2, size=(32, 40), batch_size=2, seed=3)


class TestFramesContract(LoaderContract):
    kind, main, sample_shape = "frames", "frames", (4, 3, 16, 16)
    exact = ("index", "label", "timestamps")
    tolerance = 0.06  # normalized units: two JPEG decoders and resizers

    def break_samples(self, root, modality):
        garbage_jpegs(modality.path(1))
        return {1}, re.escape(modality.path(1)), ""


def _extract(src, dst, *extra):
    return subprocess.run([sys.executable, "-m", "dali_pipes.frames", "extract", str(src),
                           str(dst), "--no-progress", *extra],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("frames")
    src = small_video_folder(base / "src", n_videos=3, n_classes=2, frames=(20, 12, 17))
    run = _extract(src, base / "dst")
    assert run.returncode == 0, run.stderr
    return src, base / "dst"


def test_extract_layout_and_timestamps(trees):
    src, dst = trees
    assert is_frame_folder_tree(dst) and not is_frame_folder_tree(src)
    for video in sorted(src.glob("*/*.webm")):
        out = dst / video.parent.name / video.stem
        info = probe_video(video)
        assert (out / COMPLETE).exists()
        ts = np.load(out / TIMESTAMPS)
        assert ts.dtype == np.float64
        np.testing.assert_array_equal(ts, info.timestamps)
        assert len(list(out.glob("frame_*.jpg"))) == info.frame_count
        assert (out / frame_name(info.frame_count - 1)).exists()


def _batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def test_loader_matches_video_modality(trees, backend):
    src, dst = trees
    from torch_bridge.modalities.video_frames import FrameFolderModality
    frames_loader = make_loader("video", dst, backend=backend, **OPTS)
    assert isinstance(frames_loader._engine.modality, FrameFolderModality)
    video_loader = make_loader("video", src, backend=backend, **OPTS)
    got, ref = _batches(frames_loader), _batches(video_loader)
    seen = []
    mod = frames_loader._engine.modality
    for b, r in zip(got, ref, strict=True):
        n = len(b["index"])
        assert b["frames"].shape == (n, 4, 3, 32, 40) and b["frames"].dtype.is_floating_point
        assert b["timestamps"].shape == (n, 4) and str(b["timestamps"].dtype) == "torch.float64"
        assert b["label"].tolist() == r["label"].tolist()
        assert b["index"].tolist() == r["index"].tolist()
        seen += b["index"].tolist()
        np.testing.assert_array_equal(b["timestamps"].numpy(), r["timestamps"].numpy())
        for row, i in enumerate(b["index"].tolist()):  # the probe's timestamps, same clip
            info = probe_video(video_loader._engine.modality.path(i))
            np.testing.assert_array_equal(b["timestamps"][row].numpy(),
                                          info.timestamps[mod.clip(0, i)])
        diff = (b["frames"] - r["frames"]).abs().mean().item()
        assert diff < 0.06, diff  # normalized units (~3.5 levels of 255); measured ~0.03
    assert sorted(seen) == list(range(3))


def test_backends_agree_at_native_size(trees):
    _, dst = trees
    opts = dict(clip_length=3, stride=1, size=None, batch_size=3, seed=1, shuffle=False)
    (d,) = _batches(make_loader("video", dst, backend="dali", **opts))
    (t,) = _batches(make_loader("video", dst, backend="torch", **opts))
    assert d["frames"].shape == (3, 3, 3, 48, 64)
    assert (d["frames"] - t["frames"]).abs().max().item() < 1e-3
    assert d["index"].tolist() == t["index"].tolist() == [0, 1, 2]


def test_rerun_skips_and_corrupt_video_reported(tmp_path):
    src = small_video_folder(tmp_path / "src", n_videos=2, n_classes=1, frames=(8, 10))
    (src / "class_0" / "broken.webm").write_bytes(b"not a video at all" * 10)
    run = _extract(src, tmp_path / "dst", "--quality", "80")
    assert run.returncode == 1
    assert "broken.webm" in run.stderr
    out = tmp_path / "dst" / "class_0"
    assert sorted(p.name for p in out.iterdir()) == ["vid_0000", "vid_0001"]
    mtime = (out / "vid_0000" / frame_name(0)).stat().st_mtime_ns
    (src / "class_0" / "broken.webm").unlink()
    again = _extract(src, tmp_path / "dst")
    assert again.returncode == 0, again.stderr
    assert "skipped 2" in again.stdout
    assert (out / "vid_0000" / frame_name(0)).stat().st_mtime_ns == mtime


def test_every_n(tmp_path):
    src = small_video_folder(tmp_path / "src", n_videos=1, n_classes=1, frames=(10,))
    assert _extract(src, tmp_path / "dst", "--every", "3").returncode == 0
    out = tmp_path / "dst" / "class_0" / "vid_0000"
    ts = np.load(out / TIMESTAMPS)
    np.testing.assert_array_equal(ts, probe_video(src / "class_0" / "vid_0000.webm")
                                  .timestamps[[0, 3, 6, 9]])
    assert len(list(out.glob("*.jpg"))) == 4
