"""resize="short_side" crops and views=(clips, crops) multi-view evaluation on video files,
frame folders and fusion, both backends against torchvision on the PyAV-decoded frames."""
from __future__ import annotations

import av
import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import functional as F

from dali_pipes.formats.video import decode_frames_pyav
from dali_pipes.geometry.clip_crops import clip_windows
from dali_pipes.geometry.draws import flips
from dali_pipes.sample_data.sample_fusion import small_fusion_folder
from dali_pipes.sample_data.sample_video import write_video
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.sources.frames import extract_tree
from torch_bridge import make_loader, registry

MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1) * 255
STD = torch.tensor(IMAGENET_STD).view(3, 1, 1) * 255
T, STRIDE, SIZE, SHORT = 4, 2, 16, 20
CROP = dict(clip_length=T, stride=STRIDE, size=SIZE, resize="short_side", short_side=SHORT)
EXACT = {"scaled_decode": False}  # full-size decode + torchvision: what `_reference` computes


def _textured(rng, n_frames, height, width):
    """(n, H, W, 3) uint8: a smooth random field (8x bilinear upsampling of noise) drifting
    one pixel per frame, so a window 8 pixels away differs, and the codec keeps it."""
    grid = torch.from_numpy(rng.integers(0, 256, (3, height // 8 + 2, width // 8 + 3))
                            .astype(np.float32))
    big = torch.nn.functional.interpolate(grid[None], scale_factor=8, mode="bilinear")[0]
    big = big.round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
    return np.stack([big[:height, t:t + width] for t in range(n_frames)])


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """3 VP9 clips of 64x36 (16:9) and one portrait 36x64 clip, in 2 classes."""
    root = tmp_path_factory.mktemp("crops") / "v"
    rng = np.random.default_rng(5)
    for i, (h, w, n) in enumerate(((36, 64, 14), (36, 64, 9), (36, 64, 12), (64, 36, 10))):
        write_video(root / f"class_{i % 2}" / f"vid_{i}.webm", _textured(rng, n, h, w))
    return root


@pytest.fixture(scope="module")
def wide_frames(wide, tmp_path_factory):
    dst = tmp_path_factory.mktemp("crops_frames") / "f"
    assert not extract_tree(wide, dst, progress=False).failed
    return dst


def _loader(data, backend, modality="video", **kw):
    options = dict(CROP, batch_size=3, seed=2)
    options.update(kw)
    if backend == "torch":
        options.setdefault("reference", {"num_workers": 0})
    return make_loader(modality, data, backend=backend, **options)


def _all(loader):
    batches = [{k: v.clone() for k, v in b.items()} for b in loader]
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _pixels(frames):
    return frames * STD + MEAN


def _reference(loader, index, key_window, flip):
    """torchvision on the PyAV decode of the clip the loader's plan chose: resize to the
    window's shape, crop it, flip."""
    clip = torch.from_numpy(decode_frames_pyav(loader.path(index), loader._engine.modality
                                               .clip(0, index))[0]).permute(0, 3, 1, 2)
    rh, rw, top, left = (int(v) for v in key_window)
    out = F.crop(F.resize(clip, [rh, rw], antialias=True), top, left, SIZE, SIZE).float()
    return out.flip(-1) if flip else out


def _windows(data_loader, indices, heights, widths, train=True):
    mod = data_loader._engine.modality
    return clip_windows(2, 0, indices, heights, widths, size=(SIZE, SIZE),
                        short_side=SHORT, train=train, crop_id=mod.source.views(indices)[2],
                        crops=mod.source.crops)


def _shapes(loader, indices):
    info = [loader._engine.modality.source.info(i) for i in indices]
    return [i.height for i in info], [i.width for i in info]


def test_train_crops_flips_and_starts_follow_the_plan_on_both_backends(wide):
    dali, ref = _all(_loader(wide, "dali")), _all(_loader(wide, "torch", **EXACT))
    assert torch.equal(dali["index"], ref["index"])
    assert torch.equal(dali["timestamps"], ref["timestamps"])  # the same clip starts
    assert dali["frames"].shape == (4, T, 3, SIZE, SIZE)
    loader = _loader(wide, "torch")
    index = dali["index"].numpy()
    windows = _windows(loader, index, *_shapes(loader, index))
    assert len({tuple(w) for w in windows[:, 2:].tolist()}) > 1  # crops differ per clip
    mirror = flips(2, 0, index)
    for row, i in enumerate(index.tolist()):
        expected = _reference(loader, i, windows[row], mirror[row])
        torch.testing.assert_close(_pixels(ref["frames"][row]), expected, atol=1e-3, rtol=0)
        assert (_pixels(dali["frames"][row]) - expected).abs().mean() < 3.0
        other, axis = windows[row].copy(), 2 if windows[row][0] > windows[row][1] else 3
        other[axis] = (other[axis] + 8) % (other[axis - 2] - SIZE + 1)  # 8+ pixels away
        assert (_pixels(dali["frames"][row]) - _reference(loader, i, other, mirror[row])
                ).abs().mean() > 10.0  # another window is far: the test can fail


def test_16_9_clip_keeps_its_aspect_in_an_eval_centre_crop(wide, backend):
    out = _all(_loader(wide, backend, train=False, shuffle=False))
    squashed = _all(_loader(wide, backend, train=False, shuffle=False, resize="squash",
                            short_side=None))
    loader = _loader(wide, "torch", train=False)
    for i in range(4):
        clip = torch.from_numpy(decode_frames_pyav(loader.path(i), loader._engine.modality
                                                   .clip(0, i))[0]).permute(0, 3, 1, 2)
        resized = F.resize(clip, [SHORT], antialias=True)  # torchvision keeps the aspect
        assert resized.shape[-2:] == ((20, 35) if i < 3 else (35, 20))
        expected = F.center_crop(resized, [SIZE, SIZE]).float()
        assert (_pixels(out["frames"][i]) - expected).abs().mean() < 3.0
        assert (_pixels(squashed["frames"][i]) - expected).abs().mean() > 10.0
    again = _all(_loader(wide, backend, train=False, shuffle=False, seed=9))
    assert torch.equal(again["frames"], out["frames"])  # eval: no seed in the pixels


def test_views_give_every_view_of_every_video_once(wide, backend):
    loader = _loader(wide, backend, train=False, views=(2, 3), batch_size=5)
    out = _all(loader)
    assert set(out) == set(registry.get("video").schema(views=True))
    assert len(out["index"]) == 4 * 6 and len(loader) == 5
    pairs = sorted(zip(out["video"].tolist(), out["view"].tolist(), strict=True))
    assert pairs == [(v, k) for v in range(4) for k in range(6)]
    np.testing.assert_array_equal(out["video"].numpy(), out["index"].numpy() // 6)
    np.testing.assert_array_equal(out["view"].numpy(), out["index"].numpy() % 6)
    by_index = {i: row for row, i in enumerate(out["index"].tolist())}
    for video in range(4):  # 3 crops share a clip start; the 2 clips differ
        ts = [out["timestamps"][by_index[video * 6 + view]] for view in range(6)]
        assert all(torch.equal(ts[0], t) for t in ts[1:3])
        assert not torch.equal(ts[0], ts[3])
    ref = _loader(wide, "torch", train=False, views=(2, 3))
    for index in range(24):
        video, view = divmod(index, 6)
        crop = view % 3
        h, w = (36, 64) if video < 3 else (64, 36)
        window = _windows(ref, [index], [h], [w], train=False)[0]
        room = 35 - SIZE  # along the long side, landscape or portrait
        assert window[3 if video < 3 else 2] == [0, 10, room][crop]
        assert window[2 if video < 3 else 3] == 2  # centred on the short side
        got = _pixels(out["frames"][by_index[index]])
        assert (got - _reference(ref, index, window, False)).abs().mean() < 3.0


def test_resume_mid_epoch_with_views(wide, backend):
    full = [{k: v.clone() for k, v in b.items()}
            for b in _loader(wide, backend, train=False, views=(2, 3), batch_size=5)]
    first = _loader(wide, backend, train=False, views=(2, 3), batch_size=5)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    first.close()
    resumed = _loader(wide, backend, train=False, views=(2, 3), batch_size=5)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(full) - 2
    for a, b in zip(rest, full[2:], strict=True):
        for name in ("index", "video", "view", "timestamps", "frames"):
            assert torch.equal(a[name], b[name]), name


def test_frame_folders_crop_like_the_video_files(wide, wide_frames, backend):
    for train in (True, False):
        files = _all(_loader(wide, backend, train=train))
        frames = _all(_loader(wide_frames, backend, train=train))
        assert torch.equal(files["index"], frames["index"])
        assert torch.equal(files["timestamps"], frames["timestamps"])
        diff = (_pixels(files["frames"]) - _pixels(frames["frames"])).abs().mean()
        assert diff < 4.0, diff  # JPEG extraction (quality 90) on top of the decoders
    views = _all(_loader(wide_frames, backend, train=False, views=(1, 3), batch_size=4))
    pairs = zip(views["video"].tolist(), views["view"].tolist(), strict=True)
    assert sorted(pairs) == [(v, k) for v in range(4) for k in range(3)]


def test_frame_folder_backends_agree(wide_frames):
    dali = _all(_loader(wide_frames, "dali", views=(2, 3), train=False, batch_size=6))
    ref = _all(_loader(wide_frames, "torch", views=(2, 3), train=False, batch_size=6))
    for name in ("index", "video", "view", "timestamps"):
        assert torch.equal(dali[name], ref[name]), name
    assert (_pixels(dali["frames"]) - _pixels(ref["frames"])).abs().mean() < 1.0


def test_fusion_takes_the_crop_options(tmp_path, backend):
    data = small_fusion_folder(tmp_path / "f", n_videos=2, size=(64, 36), frames=(12, 14))
    out = _all(_loader(data, backend, modality="fusion", train=False, views=(2, 3),
                       batch_size=6))
    assert set(out) == set(registry.get("fusion").schema(views=True))
    assert out["frames"].shape == (12, T, 3, SIZE, SIZE) and out["imu"].shape[:2] == (12, T)
    assert sorted(out["index"].tolist()) == list(range(12))


@pytest.mark.parametrize("options, match", [
    (dict(resize="crop"), "resize"),
    (dict(resize="squash", short_side=20), "short_side"),
    (dict(short_side=12), "short_side"),
    (dict(short_side=20.5), "short_side"),
    (dict(size=None), "size"),
    (dict(views=(2, 3)), r"views.*train=False"),
    (dict(views=(2, 3), train=False, clips_per_video=2), "clips_per_video"),
    (dict(views=(2, 3), train=False, resize="squash", short_side=None), "resize"),
    (dict(views=(0, 3), train=False), "views"),
    (dict(views=(2,), train=False), "views"),
])
def test_bad_options_name_the_option(wide, options, match):
    with pytest.raises(ValueError, match=match):
        _loader(wide, "dali", **options)


def test_temporal_views_with_squash(wide):
    out = _all(_loader(wide, "dali", train=False, views=(3, 1), resize="squash",
                       short_side=None, batch_size=6))
    assert sorted(out["index"].tolist()) == list(range(12))
    assert out["view"].tolist() == (out["index"] % 3).tolist()
    assert out["frames"].shape == (12, T, 3, SIZE, SIZE)


def test_pyav_fallback_clips_are_cut_in_the_feed_with_the_plans_window(tmp_path):
    if "libx264" not in av.codecs_available:
        pytest.skip("PyAV has no libx264 encoder")
    rng = np.random.default_rng(3)
    for i in range(3):  # H.264: no CPU decoder in DALI, so PyAV decodes in the feed
        write_video(tmp_path / "v" / f"class_{i % 2}" / f"h264_{i}.mp4",
                    _textured(rng, 12, 36, 64), codec="libx264")
    dali = _all(_loader(tmp_path / "v", "dali", **EXACT))
    ref = _all(_loader(tmp_path / "v", "torch", **EXACT))
    assert torch.equal(dali["index"], ref["index"])
    assert torch.equal(dali["timestamps"], ref["timestamps"])
    # the same decode and the same torchvision call: equal up to float rounding
    torch.testing.assert_close(dali["frames"], ref["frames"], atol=1e-4, rtol=0)
    loader = _loader(tmp_path / "v", "torch", **EXACT)
    index = ref["index"].numpy()
    windows = _windows(loader, index, [36] * 3, [64] * 3)
    for row, i in enumerate(index.tolist()):
        expected = _reference(loader, i, windows[row], flips(2, 0, index)[row])
        torch.testing.assert_close(_pixels(ref["frames"][row]), expected, atol=1e-3, rtol=0)
