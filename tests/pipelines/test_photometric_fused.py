"""The fused colour-jitter operator (DpPhotometric, dali_pipes/native/photometric_op.cc)
gives torchvision's pixels exactly (max difference 0): brightness, contrast, saturation and
hue alone at several factors and all together, on even and odd sizes, hue on a grid of
colours with every kind of tie between channels, and grayscale by each row's flag; both with
its 8-lane (AVX2) steps and with the scalar form alone (non-AVX2 builds, block tails); bad
inputs raise naming the sample and the field; DALI's own operators still run where the
operator is not used."""
from __future__ import annotations

import numpy as np
import nvidia.dali.fn as fn
import pytest
import torch
from nvidia.dali import Pipeline

from dali_pipes import native
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image import build_image_pipeline
from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.photometric_graph import adjust_mask, fused_photometric_applies, photometric
from dali_pipes.sample_data.sample_images import photo_like

pytestmark = pytest.mark.parametrize("fused", [True])
# the operator's steps: as the graph runs them (8 lanes where built with AVX2, the rest
# scalar), and the scalar form on every pixel
LANES = pytest.mark.parametrize("vectorized", [True, False], ids=["lanes", "scalar"])

# even and odd sizes; 1x1 and 3x5 have fewer pixels than the operator's 8 lanes
SHAPES = [(32, 32), (17, 23), (1, 1), (3, 5), (40, 9)]
ONLY = {"brightness": (0.5, 0, 0, 0), "contrast": (0, 0.5, 0, 0),
        "saturation": (0, 0, 0.9, 0), "hue": (0, 0, 0, 0.5)}
# per adjustment, the factors tried (hue: shifts in turns); 1.0 / 0.0 are torchvision's
# identities, which the operator may skip (hue never: torchvision round-trips through HSV)
FACTORS = {"brightness": (0.0, 0.37, 1.0, 1.29, 1.9), "contrast": (0.0, 0.41, 1.0, 1.33, 2.2),
           "saturation": (0.0, 0.5, 1.0, 1.5, 3.0), "hue": (-0.5, -0.21, 0.0, 0.07, 0.5)}
COLUMN = {"brightness": 0, "contrast": 1, "saturation": 2, "hue": 3}


def _const(batch):
    return lambda: batch


def _run(images, rows, recipe, fused=True, vectorized=True):
    """`photometric` on the CPU; with vectorized=False the operator itself, scalar."""
    pipe = Pipeline(batch_size=len(images), num_threads=2, device_id=None,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=_const(images), layout="HWC")
        j = fn.external_source(source=_const([np.asarray(r, np.float32) for r in rows]))
        if vectorized:
            out = photometric(x, j, None, device="cpu", recipe=recipe, fused=fused)
        else:
            out = fn.dp_photometric(x, j, adjust=adjust_mask(recipe),  # type: ignore
                                    vectorized=False)
        pipe.set_outputs(out)
    pipe.build()
    (out,) = pipe.run()
    return [np.asarray(out[i]) for i in range(len(images))]


def _torchvision(image, row, recipe):
    """torch_bridge.recipes.photometric's colour steps (the torch path's; no blur) on one HWC image,
    with the float32 row's factors (as the loader passes them; 1 - factor then matches the
    operator's)."""
    from torch_bridge.recipes.photometric import apply_photometric
    assert recipe.photometric.blur == 0
    t = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
    return apply_photometric(t, np.asarray(row, np.float32), 0.0, recipe).permute(1, 2, 0).numpy()


def _images(shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    out = [np.ascontiguousarray(photo_like(rng, h, w)) for h, w in shapes]
    out.append(rng.integers(0, 256, (13, 11, 3), dtype=np.uint8))  # noise: every colour
    return out


def _max_diff(got, images, rows, recipe):
    return [int(np.abs(g.astype(int) - _torchvision(im, r, recipe).astype(int)).max())
            for g, im, r in zip(got, images, rows, strict=True)]


@LANES
@pytest.mark.parametrize("name", list(ONLY))
def test_each_adjustment_alone_is_exactly_torchvision(fused, native_ops, name, vectorized):
    recipe = image_recipe(color_jitter=ONLY[name])
    base = _images()
    images, rows = [], []
    for factor in FACTORS[name]:
        row = [1.0, 1.0, 1.0, 0.0, 0.0]
        row[COLUMN[name]] = factor
        images += base
        rows += [row] * len(base)
    got = _run(images, rows, recipe, fused, vectorized)
    assert _max_diff(got, images, rows, recipe) == [0] * len(images)
    changed = [not np.array_equal(g, im) for g, im in zip(got, images, strict=True)]
    assert any(changed)


@LANES
def test_all_adjustments_together_are_exactly_torchvision(fused, native_ops, vectorized):
    recipe = image_recipe(color_jitter=(0.4, 0.4, 0.4, 0.1), grayscale=0.5)
    rng = np.random.default_rng(3)
    images = _images(seed=1) * 4
    u = rng.random((len(images), 5))
    rows = np.stack([0.6 + 0.8 * u[:, 0], 0.6 + 0.8 * u[:, 1], 0.6 + 0.8 * u[:, 2],
                     -0.1 + 0.2 * u[:, 3], (u[:, 4] < 0.5)], 1).astype(np.float32)
    got = _run(images, list(rows), recipe, fused, vectorized)
    assert _max_diff(got, images, rows, recipe) == [0] * len(images)


@LANES
def test_hue_on_a_grid_of_colours_with_ties(fused, native_ops, vectorized):
    """Every (r, g, b) with channels in steps of 15 (0 ... 255): grays, and each way two
    channels tie for the maximum or minimum, at shifts that cross sector borders."""
    levels = np.arange(0, 256, 15, dtype=np.uint8)
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), -1).reshape(-1, 3)
    image = np.ascontiguousarray(grid.reshape(len(levels) ** 2, len(levels), 3))
    recipe = image_recipe(color_jitter=ONLY["hue"])
    shifts = (-0.5, -1 / 6, -0.0123, 1 / 3, 0.5)
    rows = [[1.0, 1.0, 1.0, s, 0.0] for s in shifts]
    got = _run([image] * len(rows), rows, recipe, fused, vectorized)
    assert _max_diff(got, [image] * len(rows), rows, recipe) == [0] * len(rows)


@LANES
def test_grayscale_follows_each_rows_flag(fused, native_ops, vectorized):
    recipe = image_recipe(grayscale=0.5)
    images = _images(seed=2)
    rows = [[1.0, 1.0, 1.0, 0.0, float(i % 2)] for i in range(len(images))]
    got = _run(images, rows, recipe, fused, vectorized)
    assert _max_diff(got, images, rows, recipe) == [0] * len(images)
    for i, (g, im) in enumerate(zip(got, images, strict=True)):
        if i % 2:
            assert (g[..., 0] == g[..., 1]).all() and (g[..., 1] == g[..., 2]).all()
        else:
            np.testing.assert_array_equal(g, im)


def test_the_adjust_mask_follows_the_recipe(fused, native_ops):
    assert adjust_mask(image_recipe(color_jitter=(0.4, 0, 0.2, 0))) == 1 | 4
    assert adjust_mask(image_recipe(color_jitter=0.4, grayscale=0.1)) == 1 | 2 | 4 | 16
    assert adjust_mask(image_recipe(color_jitter=(0, 0, 0, 0.1))) == 8
    assert adjust_mask(image_recipe(blur=0.5)) == 0


def _op(images, rows, adjust=31):
    pipe = Pipeline(batch_size=len(images), num_threads=1, device_id=None,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=_const(images), layout="HWC")
        j = fn.external_source(source=_const(rows))
        pipe.set_outputs(fn.dp_photometric(x, j, adjust=adjust))  # type: ignore[attr-defined]
    pipe.build()
    return pipe.run()


IDENTITY = np.array([1, 1, 1, 0, 0], np.float32)


@pytest.mark.parametrize("case, match", [
    ("float image", r"input 0 \(images\) must be uint8"),
    ("one channel", r"sample 1 must be an HWC image with 3 channels, got shape 4 x 5 x 1"),
    ("short row", r"sample 1 needs a \(5,\) jitter row, got shape 4\b"),
    ("negative contrast", r"sample 1 contrast factor -0.5 is not a finite number >= 0"),
    ("nan brightness", r"sample 1 brightness factor nan is not a finite number >= 0"),
    ("hue too far", r"sample 1 hue shift 0.7 is not in \[-0.5, 0.5\]"),
    ("gray flag", r"sample 1 grayscale flag 0.5 is not 0 or 1"),
    ("float jitter", r"input 1 \(jitter\) must be float32"),
])
def test_bad_inputs_name_the_sample_and_field(fused, native_ops, case, match):
    images = [np.full((4, 5, 3), 100, np.uint8) for _ in range(2)]
    rows = [IDENTITY.copy() for _ in range(2)]
    if case == "float image":
        images = [im.astype(np.float32) for im in images]
    elif case == "one channel":
        images[1] = images[1][:, :, :1].copy()
    elif case == "short row":
        rows[1] = rows[1][:4].copy()
    elif case == "float jitter":
        rows = [r.astype(np.float64) for r in rows]
    else:
        column, value = {"negative contrast": (1, -0.5), "nan brightness": (0, np.nan),
                         "hue too far": (3, 0.7), "gray flag": (4, 0.5)}[case]
        rows[1][column] = value
    with pytest.raises(RuntimeError, match="DpPhotometric: " + match):
        _op(images, rows)


def test_fields_the_recipe_leaves_off_are_not_checked(fused, native_ops):
    rows = [np.array([-1, -1, -1, 9, 0.5], np.float32)]
    (out,) = _op([np.full((2, 3, 3), 7, np.uint8)], rows, adjust=0)
    np.testing.assert_array_equal(np.asarray(out[0]), 7)


def test_a_bad_adjust_mask_is_refused(fused, native_ops):
    with pytest.raises(RuntimeError, match="DpPhotometric: adjust must be a bit mask in "
                                           "0..31, got 40"):
        _op([np.zeros((2, 2, 3), np.uint8)], [IDENTITY], adjust=40)


def test_dalis_own_operators_still_run(fused, native_ops):
    """fused=False: the composed graph (float arithmetic rounded once, DALI's YIQ hue), within
    a level or two of torchvision on average, not exact."""
    recipe = image_recipe(color_jitter=(0.4, 0.4, 0.4, 0))
    images = _images(seed=4)
    rows = [[1.3, 0.7, 1.2, 0.0, 0.0]] * len(images)
    composed = _run(images, rows, recipe, fused=False)
    got = _run(images, rows, recipe, fused=True)
    for c, g, im, r in zip(composed, got, images, rows, strict=True):
        ref = _torchvision(im, r, recipe).astype(int)
        assert c.shape == im.shape and np.abs(c.astype(int) - ref).mean() < 2.0
        np.testing.assert_array_equal(g, ref)
    assert not all(np.array_equal(c, g) for c, g in zip(composed, got, strict=True))


def test_requiring_it_when_off_says_why_and_none_falls_back(fused, monkeypatch):
    monkeypatch.setattr(native, "_loaded", {"photometric_op": None})
    monkeypatch.setattr(native, "_reasons", {"photometric_op": "DALI_PIPES_NATIVE is off"})
    recipe = image_recipe(color_jitter=0.4)
    images, rows = [np.full((6, 7, 3), 90, np.uint8)], [[1.2, 1.0, 1.0, 0.0, 0.0]]
    with pytest.raises(RuntimeError, match="fused colour-jitter operator is unavailable: "
                                           "DALI_PIPES_NATIVE is off"):
        _run(images, rows, recipe, fused=True)
    assert not fused_photometric_applies("cpu", None)
    (out,) = _run(images, rows, recipe, fused=None)
    assert out.shape == (6, 7, 3) and (out == 108).all()


def _op_names(pipe) -> list[str]:
    pipe.build()
    return [op.name for op in pipe._ops]


def test_the_image_graph_uses_it_on_the_cpu_unless_the_config_says_no(fused, native_ops):
    recipe = image_recipe(color_jitter=(0.4, 0.4, 0.4, 0.1), grayscale=0.2, blur=0.5)
    on = build_image_pipeline(device="cpu", batch_size=2, size=24, config=PipelineConfig(),
                              recipe=recipe)
    off = build_image_pipeline(device="cpu", batch_size=2, size=24,
                               config=PipelineConfig(native_ops=False), recipe=recipe)
    names_on, names_off = " ".join(_op_names(on)), " ".join(_op_names(off))
    assert "DpPhotometric" in names_on and "Hsv" not in names_on
    assert "GaussianBlur" in names_on  # the blur stays DALI's
    assert "DpPhotometric" not in names_off and "Hsv" in names_off
    assert not fused_photometric_applies("gpu", None)
