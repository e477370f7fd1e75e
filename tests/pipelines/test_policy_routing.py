"""The policy's grouped branches route every sample to its own operation: a batch mixing
all operations gives, row by row, what a batch of one operation gives (DALI CPU backend),
with DALI's own operators and with the fused operator."""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import pytest
from nvidia.dali import Pipeline

from bench.studies import policy_ops
from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.policies import OP, OPS, affine_matrices, photo_params
from dali_pipes.recipes.policies_graph import apply_policy

pytestmark = pytest.mark.parametrize("fused", [False, True], ids=["composed", "fused"])

MAGNITUDE = {"ShearX": 0.3, "ShearY": -0.3, "TranslateX": 5.0, "TranslateY": -4.0,
             "Rotate": 30.0, "Brightness": 0.6, "Color": -0.5, "Contrast": 0.7,
             "Sharpness": 0.9, "Posterize": 4.0, "Solarize": 0.4}


def _run(images: np.ndarray, ops: np.ndarray, mags: np.ndarray, fused: bool) -> np.ndarray:
    """`images` (N, H, W, 3) through the graph's policy, ops / mags (N, slots)."""
    n, h, w, _ = images.shape
    feeds = [list(images), list(affine_matrices(ops, mags, h, w)),
             list(photo_params(ops, mags))]
    pipe = Pipeline(batch_size=n, num_threads=2, device_id=None, prefetch_queue_depth=1)
    with pipe:
        x, m, p = (fn.external_source(name=f"in{i}", layout=lay)
                   for i, lay in enumerate(("HWC", None, None)))
        recipe = image_recipe(size=(h, w), auto_augment="autoaugment")
        pipe.set_outputs(apply_policy(x, m, p, device="cpu", recipe=recipe,
                                      slots=ops.shape[1], fused=fused))
    pipe.build()
    for i, arrays in enumerate(feeds):
        pipe.feed_input(f"in{i}", [np.ascontiguousarray(a, dtype=a.dtype) for a in arrays])
    (out,) = pipe.run()
    return np.stack([np.asarray(out[i]) for i in range(n)])


def test_a_batch_of_every_operation_matches_each_operation_alone(fused, native_ops):
    names = list(OPS)  # Identity ... Invert: every branch, Identity through none
    images = policy_ops.test_images(len(names), 40, seed=2)
    mags = np.array([[MAGNITUDE.get(n, 0.0)] for n in names])
    ops = np.array([[OP[n]] for n in names])
    mixed = _run(images, ops, mags, fused)
    for i, name in enumerate(names):
        alone = _run(images, np.full_like(ops, OP[name]), np.full_like(mags, mags[i, 0]),
                     fused)
        np.testing.assert_array_equal(mixed[i], alone[i], err_msg=name)
    changed = [n for i, n in enumerate(names) if not np.array_equal(mixed[i], images[i])]
    assert changed == names[1:]  # every operation but Identity did something
    np.testing.assert_array_equal(mixed[OP["Identity"]], images[OP["Identity"]])


def test_two_slots_apply_both_operations_in_turn(fused, native_ops):
    images = policy_ops.test_images(4, 40, seed=3)
    ops = np.array([[OP["Rotate"], OP["Color"]], [OP["Color"], OP["Rotate"]],
                    [OP["Posterize"], OP["Sharpness"]], [OP["Identity"], OP["Equalize"]]])
    mags = np.array([[30.0, -0.5], [-0.5, 30.0], [4.0, 0.9], [0.0, 0.0]])
    both = _run(images, ops, mags, fused)
    first = _run(images, ops[:, :1], mags[:, :1], fused)
    then = _run(first, ops[:, 1:], mags[:, 1:], fused)
    np.testing.assert_array_equal(both, then)
