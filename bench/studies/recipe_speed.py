"""Images/s of one epoch of the built-in sample set under recipe presets, both backends.

    python bench/studies/recipe_speed.py [--recipes none timm-rand-m9 ...] [--batch-size 64]

Each (recipe, backend) runs one warm-up pass and one timed pass in this process; the torch
path uses its default 2 workers. A quick look, not bench/compare.py's full report.
"""
from __future__ import annotations

import argparse
import time


def images_per_s(data, backend: str, recipe: str | None, batch_size: int) -> float:
    """Samples per second of the second pass of a fresh loader."""
    from torch_bridge import make_loader

    loader = make_loader("image", data, backend=backend, batch_size=batch_size, seed=0,
                         recipe=recipe)
    for _ in loader:
        pass
    start, n = time.perf_counter(), 0
    for batch in loader:
        n += len(batch["index"])
    rate = n / (time.perf_counter() - start)
    loader.close()
    return rate


def main(argv=None) -> None:
    from dali_pipes.sample_data.sample_images import image_dataset

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=["none", "timm-rand-m9"])
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    data = image_dataset()
    print(f"{'recipe':16s} {'dali':>8s} {'torch':>8s} {'ratio':>6s}  (images/s)")
    for name in args.recipes:
        recipe = None if name == "none" else name
        dali = images_per_s(data, "dali", recipe, args.batch_size)
        ref = images_per_s(data, "torch", recipe, args.batch_size)
        print(f"{name:16s} {dali:8.0f} {ref:8.0f} {dali / ref:6.2f}")


if __name__ == "__main__":
    main()
