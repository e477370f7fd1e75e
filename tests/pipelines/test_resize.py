"""The image graph's resize (dali_pipes.pipelines.resize): the fused CPU operator gives
torchvision's antialiased bilinear / bicubic pixels (within rounding) for downscales,
upscales and mixed ones, any channel count and tiny sizes; sizes may be per sample; bad
inputs raise naming the sample; the settings it does not cover go to DALI's fn.resize."""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import pytest
import torch
from nvidia.dali import Pipeline

from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.resize import fused_resize_applies, resize
from dali_pipes.sample_data.sample_images import photo_like

pytestmark = pytest.mark.parametrize("fused", [True])


def _const(batch):
    return lambda: batch


DEFAULT = PipelineConfig()


def _run(images, size, interpolation="bicubic", config=DEFAULT, sizes=None):
    pipe = Pipeline(batch_size=len(images), num_threads=2, device_id=None,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=_const(images), layout="HWC")
        target = size if sizes is None else fn.external_source(source=_const(sizes))
        pipe.set_outputs(resize(x, target, device="cpu", config=config,
                                interpolation=interpolation))
    pipe.build()
    (out,) = pipe.run()
    return [np.asarray(out[i]) for i in range(len(images))]


def _torchvision(image, size, interpolation):
    from torchvision.transforms.v2 import functional as F
    mode = getattr(F.InterpolationMode, interpolation.upper())
    t = torch.from_numpy(image).permute(2, 0, 1)
    return F.resize(t, list(size), interpolation=mode, antialias=True).permute(1, 2, 0).numpy()


def _images(shapes, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for h, w in shapes:
        im = photo_like(rng, h, w)
        if channels == 1:
            im = im[:, :, :1]
        elif channels == 4:
            im = np.concatenate([im, rng.integers(0, 256, (h, w, 1), dtype=np.uint8)], 2)
        out.append(np.ascontiguousarray(im))
    return out


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [(224, 224), (64, 48), (400, 520), (224, 150)])
def test_matches_torchvision_antialiased(fused, native_ops, interpolation, size):
    images = _images([(375, 500), (300, 280), (160, 420), (224, 224), (61, 93), (450, 201)])
    assert fused_resize_applies("cpu", PipelineConfig(), interpolation)
    for im, got in zip(images, _run(images, size, interpolation), strict=True):
        ref = _torchvision(im, size, interpolation)
        assert got.shape == ref.shape == (*size, 3)
        d = np.abs(got.astype(int) - ref.astype(int))
        assert d.mean() < 0.05 and d.max() <= 2, (im.shape, d.mean(), d.max())


@pytest.mark.parametrize("channels", [1, 4])
def test_any_channel_count(fused, native_ops, channels):
    images = _images([(50, 70), (33, 20)], channels=channels)
    for im, got in zip(images, _run(images, (24, 31)), strict=True):
        ref = np.stack([_torchvision(np.ascontiguousarray(im[:, :, c:c + 1]), (24, 31),
                                     "bicubic")[:, :, 0] for c in range(channels)], 2)
        assert got.shape == (24, 31, channels)
        assert np.abs(got.astype(int) - ref.astype(int)).max() <= 2


def test_tiny_and_identity_sizes(fused, native_ops):
    images = _images([(1, 1), (7, 1), (1, 9), (5, 5)])
    out = _run(images, (5, 7), "bilinear")
    assert all(o.shape == (5, 7, 3) for o in out)
    assert np.all(out[0] == images[0][0, 0])  # one pixel spreads to all
    same = _run(images[3:], (5, 5))[0]
    np.testing.assert_array_equal(same, images[3])  # no resize: the same pixels


def test_per_sample_sizes_round_floats(fused, native_ops):
    images = _images([(40, 40), (40, 40)])
    sizes = [np.array([20.4, 30.6], np.float32), np.array([12, 9], np.int32).astype(np.float32)]
    out = _run(images, None, sizes=sizes)
    assert [o.shape for o in out] == [(20, 31, 3), (12, 9, 3)]


def test_a_bad_size_names_the_sample(fused, native_ops):
    images = _images([(10, 10), (10, 10)])
    with pytest.raises(RuntimeError, match="sample 1 output size 0x5"):
        _run(images, None, sizes=[np.array([4, 4], np.int32), np.array([0, 5], np.int32)])
    with pytest.raises(RuntimeError, match="sample 0 needs a \\(2,\\) size"):
        _run(images, None, sizes=[np.array([4], np.int32), np.array([4, 4], np.int32)])


def test_a_float_image_is_refused(fused, native_ops):
    images = [np.zeros((4, 4, 3), np.float32)]
    with pytest.raises(RuntimeError, match="input 0 \\(images\\) must be uint8"):
        _run(images, (2, 2))


def test_other_settings_use_dalis_resize(fused, native_ops):
    cfg = PipelineConfig()
    assert not fused_resize_applies("cpu", cfg, "nearest")
    assert not fused_resize_applies("cpu", cfg, "lanczos")
    assert not fused_resize_applies("gpu", cfg, "bicubic")
    assert not fused_resize_applies("cpu", PipelineConfig(native_ops=False), "bicubic")
    images = _images([(60, 80)])
    dali = _run(images, (30, 40), config=PipelineConfig(native_ops=False))[0]
    ours = _run(images, (30, 40))[0]
    ref = _torchvision(images[0], (30, 40), "bicubic")
    # DALI's own resize: a different cubic, close; ours: torchvision's
    assert np.abs(dali.astype(int) - ref.astype(int)).mean() > \
        np.abs(ours.astype(int) - ref.astype(int)).mean()
    assert np.abs(dali.astype(int) - ours.astype(int)).mean() < 2.0


def _run_roi(images, size, starts, ends, interpolation="bilinear"):
    pipe = Pipeline(batch_size=len(images), num_threads=2, device_id=None,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=_const(images),
                               layout="FHWC" if images[0].ndim == 4 else "HWC")
        lo, hi = (fn.external_source(source=_const([np.asarray(v, np.float32) for v in vs]))
                  for vs in (starts, ends))
        pipe.set_outputs(resize(x, size, device="cpu", config=DEFAULT,
                                interpolation=interpolation, roi=(lo, hi)))
    pipe.build()
    (out,) = pipe.run()
    return [np.asarray(out[i]) for i in range(len(images))]


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_a_region_of_interest_is_pils_box(fused, native_ops, interpolation):
    """PIL's resize with a box is the same scheme: the window with sub-pixel edges, the
    filter reading the pixels around it that lie in the image. PIL rounds its intermediate
    pass differently from torchvision on some shapes (up to 0.23 levels on average, max 1,
    also without a box, where ours follows torchvision), hence the bound; the whole image as
    the region is exactly no region."""
    from PIL import Image
    images = _images([(120, 160), (90, 70), (200, 100)])
    boxes = [(10.0, 20.0, 110.5, 150.25), (0.0, 0.0, 90.0, 70.0), (33.3, 5.5, 40.0, 99.0)]
    starts = [(b[0], b[1]) for b in boxes]
    ends = [(b[2], b[3]) for b in boxes]
    got = _run_roi(images, (48, 64), starts, ends, interpolation)
    resample = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}[interpolation]
    for im, (y0, x0, y1, x1), g in zip(images, boxes, got, strict=True):
        ref = np.asarray(Image.fromarray(im).resize((64, 48), resample, box=(x0, y0, x1, y1)))
        d = np.abs(g.astype(int) - ref.astype(int))
        top = 1 if interpolation == "bilinear" else 4  # cubic overshoot clipped between passes
        assert g.shape == (48, 64, 3) and d.mean() < 0.3 and d.max() <= top, (d.mean(), d.max())
    whole = _run_roi(images[1:2], (48, 64), [(0.0, 0.0)], [(90.0, 70.0)], interpolation)[0]
    np.testing.assert_array_equal(whole, _run(images[1:2], (48, 64), interpolation)[0])


def test_frames_resize_one_by_one(fused, native_ops):
    clip = np.stack(_images([(60, 80)] * 5, seed=4))  # (5, 60, 80, 3)
    other = np.stack(_images([(30, 50)] * 3, seed=5))
    out = _run_roi([clip, other], (24, 32), [(5.0, 10.0), (0.0, 0.0)], [(55.0, 70.0), (30, 50)])
    assert out[0].shape == (5, 24, 32, 3) and out[1].shape == (3, 24, 32, 3)
    for f in range(5):
        alone = _run_roi([clip[f]], (24, 32), [(5.0, 10.0)], [(55.0, 70.0)])[0]
        np.testing.assert_array_equal(out[0][f], alone)
    assert not np.array_equal(out[0][0], out[0][1])  # each frame its own pixels


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_without_antialiasing_it_is_plain_interpolation(fused, native_ops, interpolation):
    """antialias=False (the throughput preset): the filter is not widened when shrinking,
    as DALI's fn.resize without antialiasing: close to it, and sharper (more aliasing)
    than the antialiased resize."""
    assert fused_resize_applies("cpu", PipelineConfig(antialias=False), interpolation)
    images = _images([(300, 400), (120, 90)])
    plain = PipelineConfig(antialias=False)
    ours = _run(images, (64, 48), interpolation, config=plain)
    dali = _run(images, (64, 48), interpolation,
                config=PipelineConfig(antialias=False, native_ops=False))
    smooth = _run(images, (64, 48), interpolation)
    for o, d, a in zip(ours, dali, smooth, strict=True):
        assert np.abs(o.astype(int) - d.astype(int)).mean() < 0.5
        assert np.abs(o.astype(int) - a.astype(int)).mean() > 2.0  # really not antialiased


def test_an_empty_or_outside_region_names_the_sample(fused, native_ops):
    images = _images([(20, 20), (20, 20)])
    with pytest.raises(RuntimeError, match="sample 1 region of interest .* is empty"):
        _run_roi(images, (4, 4), [(0, 0), (5, 5)], [(10, 10), (5, 9)])
    with pytest.raises(RuntimeError, match="sample 0 region of interest .* outside its 20x20"):
        _run_roi(images, (4, 4), [(25, 0), (0, 0)], [(30, 10), (10, 10)])
