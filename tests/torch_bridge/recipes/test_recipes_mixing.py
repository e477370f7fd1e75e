"""Batch mixing and label smoothing (issue 12 item 5): soft targets, identical parameters on
both backends, exact mid-epoch resume."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.mixing import mix_params
from torch_bridge import make_loader
from torch_bridge.recipes.mixing import mix_batch, soft_targets

MIX = dict(mixup=0.8, cutmix=1.0, label_smoothing=0.1)


def _loader(folder, backend, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("size", 32)
    kw.setdefault("seed", 11)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("image", folder, backend=backend, **kw)


def _copies(batches):
    return [{k: v.clone() for k, v in b.items()} for b in batches]


def test_soft_targets_smooth_and_sum_to_one():
    t = soft_targets(torch.tensor([0, 2]), 4, 0.2)
    assert torch.allclose(t, torch.tensor([[0.85, 0.05, 0.05, 0.05],
                                           [0.05, 0.05, 0.85, 0.05]]))


def test_mix_params_are_a_function_of_seed_epoch_position():
    rec = image_recipe(**MIX, mix_mode="elem")
    a = mix_params(1, 2, 3, 16, 32, 32, rec)
    b = mix_params(1, 2, 3, 16, 32, 32, rec)
    c = mix_params(1, 2, 4, 16, 32, 32, rec)
    for name in ("perm", "lam", "boxes", "target_lam"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.perm, c.perm)
    assert sorted(a.perm.tolist()) == list(range(16))


def test_cutmix_pastes_the_partner_box_and_corrects_lambda():
    rec = image_recipe(cutmix=1.0, mix_mode="elem")
    params = mix_params(0, 0, 0, 6, 20, 30, rec)
    images = torch.arange(6, dtype=torch.float32).view(6, 1, 1, 1).expand(6, 3, 20, 30)
    out, target = mix_batch(images.contiguous(), torch.arange(6), params, num_classes=6,
                            smoothing=0.0)
    for i in range(6):
        top, bottom, left, right = params.boxes[i].tolist()
        inside = out[i, :, top:bottom, left:right]
        assert (inside == params.perm[i]).all()
        pasted = (out[i] == params.perm[i]).float().mean().item()
        own = 1.0 - (bottom - top) * (right - left) / 600
        if params.perm[i] != i:
            assert pasted == pytest.approx(1 - own)
        assert target[i, i].item() == pytest.approx(own + (params.perm[i] == i) * (1 - own))
    torch.testing.assert_close(target.sum(1), torch.ones(6))


def test_mixup_blends_with_lambda():
    rec = image_recipe(mixup=0.4)
    params = mix_params(3, 0, 5, 4, 8, 8, rec)
    images = torch.rand(4, 3, 8, 8)
    out, _ = mix_batch(images.clone(), torch.arange(4), params, num_classes=4, smoothing=0.0)
    lam = float(params.lam[0])
    assert 0 < lam < 1 and (params.lam == lam).all()  # one lambda per batch
    torch.testing.assert_close(out, lam * images + (1 - lam) * images[params.perm])


def _mix_reference(images, params):
    """The mixing written plainly, row by row, from the original pixels."""
    out = images.clone().float()
    src = images.float()[params.perm]
    for i in range(len(images)):
        lam = float(params.lam[i])
        out[i] = out[i] * lam + src[i] * (1 - lam)
        top, bottom, left, right = params.boxes[i].tolist()
        out[i, :, top:bottom, left:right] = src[i, :, top:bottom, left:right]
    return out


@pytest.mark.parametrize("mode", ["batch", "elem"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("mix_prob", [1.0, 0.5])
def test_in_place_mixing_matches_the_plain_rows(mode, dtype, channels_last, mix_prob):
    """Mixup and cutmix rows of one batch (elem, some rows left unmixed with mix_prob 0.5)
    or whole batches, every position: the in-place version gives the plain per-row result,
    keeps dtype and memory format."""
    rec = image_recipe(mixup=0.8, cutmix=1.0, mix_mode=mode, mix_prob=mix_prob)
    gen = torch.Generator().manual_seed(0)
    unmixed = 0
    for position in range(6):
        params = mix_params(5, 1, position, 12, 16, 20, rec)
        unmixed += int(((params.lam == 1) & ~params.boxes.any(axis=1)).sum())
        images = (torch.rand(12, 3, 16, 20, generator=gen) * 255).to(dtype)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        want = _mix_reference(images, params)
        if dtype == torch.uint8:
            want = want.round().clamp(0, 255).to(torch.uint8)
        out, _ = mix_batch(images.clone(memory_format=torch.preserve_format),
                           torch.arange(12), params, num_classes=12, smoothing=0.0)
        assert out.dtype == dtype
        assert out.is_contiguous(memory_format=torch.channels_last) == channels_last
        if dtype == torch.uint8:
            assert (out.int() - want.int()).abs().max() <= 1  # float rounding at .5
        else:
            torch.testing.assert_close(out, want)
    assert (unmixed > 0) == (mix_prob < 1)  # rows a cycle passes without writing


@pytest.mark.parametrize("mode", ["batch", "elem"])
def test_backends_mix_identically(image_folder, mode):
    """Same permutation, lambdas and boxes on both backends: the targets are equal exactly
    and the mixed pixels within the backends' tolerance; labels stay the original class."""
    dali = _copies(_loader(image_folder, "dali", **MIX, mix_mode=mode))
    ref = _copies(_loader(image_folder, "torch", **MIX, mix_mode=mode))
    assert len(dali) == len(ref) == 5
    for a, b in zip(dali, ref, strict=True):
        assert a["target"].dtype == torch.float32 and a["target"].shape == (len(a["index"]), 3)
        torch.testing.assert_close(a["target"].sum(1), torch.ones(len(a["index"])))
        assert torch.equal(a["target"], b["target"]) and torch.equal(a["label"], b["label"])
        assert (a["image"] - b["image"]).abs().mean() < 0.05
    plain = _copies(_loader(image_folder, "torch"))
    assert any((p["image"] - r["image"]).abs().mean() > 0.05
               for p, r in zip(plain, ref, strict=True))


def test_label_smoothing_alone(image_folder):
    batch = next(iter(_loader(image_folder, "torch", label_smoothing=0.3, num_classes=5)))
    want = soft_targets(batch["label"], 5, 0.3)
    assert torch.equal(batch["target"], want)
    plain = next(iter(_loader(image_folder, "torch")))
    assert torch.equal(batch["image"], plain["image"])


RESUMED = [dict(**MIX, mix_mode="elem", dtype="uint8", memory_format="channels_last"),
           dict(cutmix=1.0, erasing=0.5, erasing_value="random", dtype="bfloat16")]


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("opts", RESUMED, ids=["mix-uint8-cl", "cutmix-erasing-bf16"])
def test_resume_mid_epoch_reproduces_mixed_batches(image_folder, backend, opts):
    full = _loader(image_folder, backend, **opts)
    want = _copies(full) + _copies(full)
    first = _loader(image_folder, backend, **opts)
    it = iter(first)
    got = _copies([next(it) for _ in range(3)])
    state = first.state_dict()
    resumed = _loader(image_folder, backend, **opts)
    resumed.load_state_dict(state)
    got += _copies(resumed) + _copies(resumed)
    assert len(got) == len(want) == 10
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for name in w:
            assert torch.equal(g[name], w[name]), name
    assert got[0]["image"].dtype == getattr(torch, opts["dtype"])


def test_erase_boxes_follow_torchvision_semantics():
    from dali_pipes.recipes.erasing import erase_boxes
    boxes = erase_boxes(0, 0, np.arange(2000), 32, 48, p=0.5, scale=(0.02, 0.33),
                        ratio=(0.3, 3.3))
    erased = boxes[:, 2] > 0
    assert 0.45 < erased.mean() < 0.55
    b = boxes[erased]
    area = b[:, 2] * b[:, 3] / (32 * 48)
    assert (area > 0.01).all() and (area < 0.36).all()
    assert (b[:, 0] + b[:, 2] <= 32).all() and (b[:, 1] + b[:, 3] <= 48).all()


@pytest.mark.parametrize("value", [0.0, "random"])
def test_erasing_identical_on_both_backends(image_folder, value):
    """The same boxes and noise on both backends: inside every box the pixels are equal
    exactly (the fill), and a loader without erasing differs only inside the boxes."""
    from dali_pipes.recipes.erasing import erase_boxes
    opts = dict(erasing=1.0, erasing_value=value, memory_format="channels_last")
    dali = next(iter(_loader(image_folder, "dali", **opts)))
    ref = next(iter(_loader(image_folder, "torch", **opts)))
    plain = next(iter(_loader(image_folder, "torch", memory_format="channels_last")))
    boxes = erase_boxes(11, 0, ref["index"].numpy(), 32, 32, p=1.0, scale=(0.02, 1 / 3),
                        ratio=(0.3, 3.3))
    assert (boxes[:, 2] > 0).all()
    outside = torch.ones_like(ref["image"], dtype=torch.bool)
    for row, (top, left, h, w) in enumerate(boxes.tolist()):
        box = (row, slice(None), slice(top, top + h), slice(left, left + w))
        assert torch.equal(dali["image"][box], ref["image"][box])
        if value == 0.0:
            assert (ref["image"][box] == 0).all()
        outside[box] = False
    assert torch.equal(ref["image"][outside], plain["image"][outside])
    assert ref["image"].is_contiguous(memory_format=torch.channels_last)


def test_erasing_rejects_uint8(image_folder):
    with pytest.raises(ValueError, match="erasing=0.5"):
        _loader(image_folder, "torch", erasing=0.5, dtype="uint8")
