"""Each policy operation alone, applied by the DALI graph and by torchvision to the same
uint8 images with the same magnitude: how far apart are the pixels?

    python bench/studies/policy_ops.py [--size 64] [--images 32] [--graph fused|composed|both]

Prints, per (operation, magnitude), the mean and maximum |dali - torch| in uint8 levels and
the share of pixels that differ, for the fused CPU operator (dali_pipes/native) and for the
graph of DALI's own operators (the GPU's, and the CPU's without a compiler).
tests/torch_bridge/recipes/test_recipes_policies.py holds the bounds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root, for `bench.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dali_pipes.recipes.policies import OP, OPS, affine_matrices, photo_params

CASES = [(name, m) for name in OPS if name != "Identity" for m in (
    (0.3, -0.3) if name in ("ShearX", "ShearY") else
    (9.0, -14.0) if name.startswith("Translate") else (30.0, -135.0) if name == "Rotate" else
    (0.9, -0.9) if name in ("Brightness", "Color", "Contrast", "Sharpness") else
    (4.0, 6.0) if name == "Posterize" else (0.5, 0.1) if name == "Solarize" else (0.0,))]


def test_images(n: int, size: int, seed: int = 0) -> np.ndarray:
    """(n, size, size, 3) uint8 photo-like images (HWC)."""
    from dali_pipes.sample_data.sample_images import photo_like
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(np.stack([photo_like(rng, size, size) for _ in range(n)]))


def _repeat(batch: list):
    return lambda: batch


def dali_apply(images: np.ndarray, name: str, magnitude: float,
               fused: bool | None = None) -> np.ndarray:
    """`images` (N, H, W, 3) through one operation in the DALI graph (CPU backend); `fused`
    as `apply_policy` takes it (the fused operator or DALI's own operators)."""
    import nvidia.dali.fn as fn
    from nvidia.dali import Pipeline

    from dali_pipes.recipes import image_recipe
    from dali_pipes.recipes.policies_graph import apply_policy

    n, h, w, _ = images.shape
    ops, mags = np.full((n, 1), OP[name]), np.full((n, 1), magnitude)
    feeds = [images, affine_matrices(ops, mags, h, w), photo_params(ops, mags)]
    pipe = Pipeline(batch_size=n, num_threads=1, device_id=None)
    with pipe:
        x, m, p = (fn.external_source(source=_repeat([np.ascontiguousarray(s) for s in a]),
                                      layout=lay)
                   for a, lay in zip(feeds, ("HWC", None, None), strict=True))
        recipe = image_recipe(size=(h, w), auto_augment="autoaugment")
        pipe.set_outputs(apply_policy(x, m, p, device="cpu", recipe=recipe, slots=1,
                                     fused=fused))
    pipe.build()
    (out,) = pipe.run()
    return np.stack([np.asarray(out[i]) for i in range(n)])


def torch_apply(images: np.ndarray, name: str, magnitude: float) -> np.ndarray:
    """The same with torchvision.transforms.v2.functional (torch_bridge.recipes.policies)."""
    import torch

    from torch_bridge.recipes.policies import apply_policy
    ops, mags = np.array([OP[name]]), np.array([magnitude])
    return np.stack([apply_policy(torch.from_numpy(im).permute(2, 0, 1).contiguous(), ops,
                                  mags).permute(1, 2, 0).numpy() for im in images])


def compare(images: np.ndarray, name: str, magnitude: float,
            fused: bool | None = None) -> tuple[float, int, float]:
    """(mean |diff|, max |diff|, fraction of differing values) in uint8 levels."""
    d = np.abs(dali_apply(images, name, magnitude, fused).astype(int)
               - torch_apply(images, name, magnitude).astype(int))
    return float(d.mean()), int(d.max()), float((d > 0).mean())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--graph", choices=["fused", "composed", "both"], default="both")
    args = parser.parse_args(argv)
    images = test_images(args.images, args.size)
    graphs = {"fused": [True], "composed": [False], "both": [True, False]}[args.graph]
    print(f"{'graph':9s} {'operation':14s} {'magnitude':>9s} {'mean':>6s} {'max':>4s} "
          f"{'differ':>7s}")
    for fused in graphs:
        for name, m in CASES:
            mean, top, frac = compare(images, name, m, fused)
            print(f"{'fused' if fused else 'composed':9s} {name:14s} {m:9.2f} {mean:6.2f} "
                  f"{top:4d} {frac:7.1%}")


if __name__ == "__main__":
    main()
