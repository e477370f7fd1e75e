"""Augmentation policies (issue 12 item 3): each operation agrees between the DALI graph and
torchvision (bench/studies/policy_ops.py measures it), the policies' choices are a function of
(seed, epoch, key), both backends agree, and bad options raise at make_loader time."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.studies.policy_ops import CASES, compare
from bench.studies.policy_ops import test_images as policy_images
from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.policies import OP, policy_ops
from dali_pipes.recipes.policies_graph import native_policy
from torch_bridge import make_loader

# max |dali - torch| per operation in uint8 levels for the graph of DALI's own operators
# (measured: docs/recipes.md). Geometry is exact but for nearest-neighbour ties; blends
# differ by one level where DALI rounds a float differently; equalize is OpenCV's histogram
# equalisation, not PIL's. The fused CPU operator is exact for every operation.
BOUND_MEAN = {"Rotate": 1.0, "Color": 0.1, "Sharpness": 0.1, "AutoContrast": 0.05,
              "Equalize": 10.0}


@pytest.fixture(scope="module")
def images():
    return policy_images(8, 32)


@pytest.mark.parametrize("name, magnitude", CASES, ids=[f"{n}{m}" for n, m in CASES])
def test_each_operation_agrees_with_torchvision(images, name, magnitude):
    mean, top, _ = compare(images, name, magnitude, fused=False)
    assert mean <= BOUND_MEAN.get(name, 0.0)
    if name not in BOUND_MEAN:
        assert top == 0  # identical pixels


@pytest.mark.parametrize("fused", [True])
def test_the_fused_operator_is_exactly_torchvision(fused, native_ops):
    """Every operation gives torchvision's pixels, on even and odd sizes; rotation on odd
    sizes but for nearest-neighbour ties (a pixel centre on a cell border, where float
    rounding of the two coordinate computations decides)."""
    big = policy_images(6, 45, seed=5)
    extra = [("Rotate", 77.0), ("Contrast", -0.3), ("Solarize", 0.0)]
    for imgs in (policy_images(4, 64, seed=1), big, big[:, :17, :30]):
        odd = imgs.shape[1] % 2 == 1
        for name, magnitude in CASES + extra:
            mean, top, frac = compare(np.ascontiguousarray(imgs), name, magnitude, fused=True)
            if name == "Rotate" and odd:
                assert mean < 0.3 and frac < 0.01, (name, magnitude, mean, frac)
            else:
                assert top == 0, (imgs.shape, name, magnitude, mean)


def test_operations_change_the_image(images):
    from bench.studies.policy_ops import torch_apply
    for name, magnitude in CASES:
        assert not np.array_equal(torch_apply(images, name, magnitude), images), name


def test_policy_draws_follow_torchvision_spaces():
    keys = np.arange(3000)
    ops, mags = policy_ops(0, 0, keys, image_recipe(auto_augment="randaugment"), 224, 224)
    assert ops.shape == (3000, 2) and set(np.unique(ops)) == set(range(14))
    rot = np.abs(mags[ops == OP["Rotate"]])
    assert np.allclose(rot, 9 / 30 * 30)  # magnitude 9 of 30 of 30 degrees
    assert 0.4 < (mags[ops == OP["Rotate"]] < 0).mean() < 0.6
    wide_ops, wide = policy_ops(0, 0, keys, image_recipe(auto_augment="trivialaugment"),
                                224, 224)
    assert wide_ops.shape == (3000, 1) and np.abs(wide[wide_ops == OP["Rotate"]]).max() <= 135
    auto_ops, _ = policy_ops(0, 0, keys, image_recipe(auto_augment="autoaugment"), 224, 224)
    assert OP["Invert"] in auto_ops and OP["ShearY"] not in auto_ops
    again = policy_ops(0, 0, keys[::-1], image_recipe(auto_augment="randaugment"), 224, 224)
    assert np.array_equal(again[0][::-1], ops)


@pytest.mark.parametrize("policy", ["trivialaugment", "randaugment", "autoaugment"])
def test_backends_agree_on_policies(image_folder, policy):
    kw = dict(batch_size=16, size=32, seed=3, dtype="uint8", auto_augment=policy)
    dali = next(iter(make_loader("image", image_folder, backend="dali", **kw)))
    ref = next(iter(make_loader("image", image_folder, backend="torch",
                                reference={"num_workers": 0}, **kw)))
    plain = next(iter(make_loader("image", image_folder, backend="torch",
                                  reference={"num_workers": 0}, **{**kw, "auto_augment": None})))
    assert torch.equal(dali["index"], ref["index"])
    diff = (dali["image"].float() - ref["image"].float()).abs().mean()
    if native_policy():
        # exact IDCT, torchvision's resize weights and arithmetic: the torch path's pixels
        # (but for nearest-neighbour ties of rotations on odd sizes)
        assert diff < 0.1
    else:  # DALI's operators: ~1 level apart, more where equalize stretches levels
        assert diff < 5.0
    assert (plain["image"].float() - ref["image"].float()).abs().mean() > 5.0


@pytest.mark.parametrize("option, value", [("auto_augment", "augmix"), ("magnitude", 31),
                                           ("magnitude", -1), ("num_ops", 0)])
def test_bad_policy_options(image_folder, option, value):
    with pytest.raises(ValueError, match=f"{option}={value!r}"):
        make_loader("image", image_folder, backend="dali", **{option: value})
