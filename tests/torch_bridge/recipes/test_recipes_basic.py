"""Image recipe options (issue 12 items 1, 2): the basic transform's options and the output
formats on both backends, validated at make_loader time."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.geometry import draws
from dali_pipes.recipes import image_recipe
from torch_bridge import make_loader

FAST_TORCH = {"num_workers": 0}


def _loader(folder, backend, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("size", 32)
    kw.setdefault("seed", 5)
    if backend == "torch":
        kw.setdefault("reference", FAST_TORCH)
    return make_loader("image", folder, backend=backend, **kw)


def _first(folder, backend, **kw):
    loader = _loader(folder, backend, **kw)
    batch = next(iter(loader))
    out = {k: v.clone() for k, v in batch.items()}
    loader.close()
    return out


@pytest.mark.parametrize("option, value, words", [
    ("scale", (0.0, 1.0), "scale=(0.0, 1.0)"), ("scale", (0.5, 1.2), "(0.0, 1.0]"),
    ("scale", (0.9, 0.5), "min <= max"), ("ratio", (-1, 2), "ratio"),
    ("interpolation", "area", "bilinear, bicubic"), ("crop_pct", 1.5, "crop_pct=1.5"),
    ("size", (0, 32), "positive int"), ("size", 2.5, "size=2.5"),
    ("mean", (0.5, 0.5), "1 or 3 values"), ("std", (0.2, 0.0, 0.2), "std="),
    ("hflip", 1.5, "hflip=1.5"), ("vflip", -0.1, "[0.0, 1.0]"),
    ("dtype", "int16", "float32, float16, bfloat16, uint8"),
    ("memory_format", "nhwc", "contiguous, channels_last"),
    ("mixup", -0.2, "mixup=-0.2"), ("cutmix", float("nan"), "cutmix"),
    ("label_smoothing", 1.0, "label_smoothing=1.0"), ("mix_mode", "pair", "batch, elem"),
    ("num_classes", 2, "at least 3")])
def test_bad_options_raise_at_make_loader(image_folder, option, value, words):
    """Out of range: ValueError naming the option and the allowed range, before any batch
    (num_classes=2 with labels 0..2 needs a mixing option to matter)."""
    extra = {"label_smoothing": 0.1} if option == "num_classes" else {}
    with pytest.raises(ValueError, match=option) as info:
        make_loader("image", image_folder, backend="torch", **{option: value}, **extra)
    assert words in str(info.value)


def test_default_recipe_draws_the_default_parameters():
    """recipe_params at the default recipe == image_params (train and eval)."""
    idx = np.arange(50)
    h, w = np.full(50, 375), np.full(50, 500)
    for train in (True, False):
        win, hf, vf = draws.recipe_params(3, 1, idx, h, w, image_recipe(train=train))
        want_win, want_flip = draws.image_params(3, 1, idx, h, w, size=224, train=train)
        assert np.array_equal(win, want_win) and np.array_equal(hf, want_flip)
        assert not vf.any()


def test_recipe_windows_follow_scale_ratio_and_crop_pct():
    idx = np.arange(400)
    h, w = np.full(400, 300), np.full(400, 400)
    rec = image_recipe(scale=(0.5, 0.6), ratio=(1.0, 1.0), vflip=0.3, hflip=0.0)
    win, hf, vf = draws.recipe_params(0, 0, idx, h, w, rec)
    area = win[:, 2] * win[:, 3] / (300 * 400)
    assert (area > 0.49).all() and (area < 0.61).all()
    assert (np.abs(win[:, 2] - win[:, 3]) <= 1).all() and not hf.any()
    assert 0.2 < vf.mean() < 0.4
    ev = draws.recipe_params(0, 0, idx[:1], h[:1], w[:1],
                               image_recipe(train=False, size=(100, 200), crop_pct=1.0))[0]
    # shorter side 300 -> 200: a (150, 300) window in source pixels, centred
    assert ev[0].tolist() == [75, 50, 150, 300]


def test_basic_options_agree_across_backends(image_folder):
    """(H, W), scale, ratio, bicubic, both flips always on, other mean/std: the same windows
    and flips on both backends, pixels within the backends' usual tolerance; the vertical
    flip is really applied (the batch differs far more without it)."""
    opts = dict(size=(24, 40), scale=(0.3, 0.9), ratio=(0.5, 2.0), interpolation="bicubic",
                hflip=1.0, vflip=1.0, mean=0.5, std=(0.25, 0.25, 0.25))
    dali, ref = _first(image_folder, "dali", **opts), _first(image_folder, "torch", **opts)
    assert dali["image"].shape == (8, 3, 24, 40) == ref["image"].shape
    assert torch.equal(dali["index"], ref["index"])
    assert (dali["image"] - ref["image"]).abs().mean() < 0.05
    unflipped = _first(image_folder, "torch", **{**opts, "vflip": 0.0})
    assert (unflipped["image"] - ref["image"]).abs().mean() > 0.2


@pytest.mark.parametrize("train", [True, False])
def test_nearest_picks_the_same_pixels_on_both_backends(image_folder, train):
    """Nearest-neighbour resizing samples pixel centres on both backends (DALI's INTERP_NN,
    torchvision's NEAREST_EXACT, PIL's NEAREST): the same pixels, not a neighbour's."""
    opts = dict(train=train, size=(24, 32), interpolation="nearest", dtype="uint8")
    dali, ref = _first(image_folder, "dali", **opts), _first(image_folder, "torch", **opts)
    diff = (dali["image"].int() - ref["image"].int()).abs()
    # a tie (a destination centre exactly between two source pixels) may still go either
    # way: a few values; a neighbour's convention moved most of them (mean 15 levels)
    assert diff.float().mean() < 1.0 and (diff > 0).float().mean() < 0.02


def test_eval_crop_pct_agrees_across_backends(image_folder):
    opts = dict(train=False, shuffle=False, size=(24, 32), crop_pct=0.95)
    dali, ref = _first(image_folder, "dali", **opts), _first(image_folder, "torch", **opts)
    assert dali["image"].shape == (8, 3, 24, 32)
    assert (dali["image"] - ref["image"]).abs().mean() < 0.05


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "uint8"])
@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_output_formats(image_folder, backend, dtype, memory_format):
    """Each dtype and memory format: the batch has it, and its values equal the float32
    contiguous batch (within the dtype's rounding; uint8 is the unnormalised pixels)."""
    batch = _first(image_folder, backend, dtype=dtype, memory_format=memory_format)
    image = batch["image"]
    assert image.dtype == getattr(torch, dtype) and image.shape == (8, 3, 32, 32)
    if memory_format == "channels_last":
        assert image.is_contiguous(memory_format=torch.channels_last)
        assert not image.is_contiguous()
    else:
        assert image.is_contiguous()
    plain = _first(image_folder, backend)["image"]
    if dtype == "uint8":
        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
        plain = plain * std + mean
        assert (image.float() - plain).abs().max() <= 1.0
    else:
        torch.testing.assert_close(image.float(), plain, atol=0.05, rtol=0.01)


def test_default_options_build_the_default_graph():
    """No option given: the same graph as before the recipes (inputs and operators), and
    the loader's batch step leaves the batch as the engine made it."""
    from dali_pipes import schema
    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.pipelines.image import build_image_pipeline, graph_inputs_for
    from dali_pipes.pipelines.inputs import graph_inputs

    rec = image_recipe(size=16)
    assert rec.is_default_graph and graph_inputs_for(rec) == schema.IMAGE_INPUTS
    cfg = PipelineConfig()
    plain = build_image_pipeline(device="cpu", batch_size=2, size=16, config=cfg)
    with_recipe = build_image_pipeline(device="cpu", batch_size=2, size=16, config=cfg,
                                       recipe=rec)
    assert graph_inputs(plain) == graph_inputs(with_recipe) == schema.names(
        schema.IMAGE_INPUTS)
    assert plain.serialize() == with_recipe.serialize()
    jittered = build_image_pipeline(device="cpu", batch_size=2, size=16, config=cfg,
                                    recipe=image_recipe(size=16, color_jitter=0.1))
    assert jittered.serialize() != plain.serialize()


def test_after_batch_is_a_no_op_by_default(image_folder):
    loader = _loader(image_folder, "torch")
    modality = loader._engine.modality
    batch = next(iter(loader))
    image = batch["image"]
    out = modality.after_batch(dict(batch), 0, 0)
    assert out["image"] is image and set(out) == set(batch)
