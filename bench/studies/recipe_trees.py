"""Images/s of one recipe on both backends from two source trees (before / after a change),
side by side in one run.

    python bench/studies/recipe_trees.py BEFORE_TREE AFTER_TREE [--recipe timm-rand-m9]
                                 [--rounds 3] [--steps 8] [--batch-size 64]

Each (backend, tree) runs in its own process with PYTHONPATH set to the tree (a checkout of
this repository), on the built-in sample set; rounds are interleaved (dali before, dali
after, torch before, torch after, then again) and the medians with min-max are printed.
Compare a backend with itself across the trees: the torch path's DataLoader workers
prefetch during the warm-up, so rates of different backends are not comparable here
(bench/compare.py is for that).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, time
from dali_pipes.sample_data.sample_images import image_dataset
from torch_bridge import make_loader
backend, recipe, steps, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
loader = make_loader("image", image_dataset(), backend=backend, batch_size=batch, seed=0,
                     recipe=recipe)
it = iter(loader)
next(it), next(it)
start, n = time.perf_counter(), 0
for _ in range(steps):
    n += len(next(it)["index"])
print(json.dumps({"rate": n / (time.perf_counter() - start)}))
loader.close()
'''


def rate(tree: str, backend: str, args) -> float:
    """Images/s of one run from `tree` (a fresh process)."""
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", CHILD, backend, args.recipe, str(args.steps),
                          str(args.batch_size)], capture_output=True, text=True, env=env,
                         cwd=tree, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{backend} from {tree} failed: {out.stderr.strip()[-500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--recipe", default="timm-rand-m9")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    trees = {"before": args.before, "after": args.after}
    rates: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for backend in ("dali", "torch"):
            for name, tree in trees.items():
                rates.setdefault((backend, name), []).append(rate(tree, backend, args))
                print(f"round {r + 1}: {backend} {name} {rates[backend, name][-1]:.0f}",
                      file=sys.stderr)
    for (backend, name), values in rates.items():
        print(f"{backend:6s} {name:7s} {statistics.median(values):6.0f} images/s "
              f"({min(values):.0f}-{max(values):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
