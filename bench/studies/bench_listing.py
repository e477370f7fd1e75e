"""Listing time of an image tree: ours (directories only, and with a stat per file) against
torchvision's ImageFolder, side by side, plus the first-use stat pass behind the digest.

    python bench/studies/bench_listing.py DIR [--classes 100] [--per-class 1000] [--rounds 3]

Makes (once) DIR/data/class_k/img_i.jpg as hard links to a few small JPEGs (one per 50,000
files: a file system allows about 65,000 links per inode), then, in interleaved rounds,
times `torchvision.datasets.ImageFolder(DIR/data)`, `ImageFolderSource(DIR/data)` (default
`file_stats="lazy"`: names and entry types only), the first `listing_digest()` of that
source (the stat pass that a loader's first `state_dict()` / `load_state_dict()` runs), and
`ImageFolderSource(DIR/data, file_stats="listing")` (a stat per file while listing), and
prints the median and the best of `--rounds` of each, in seconds. Put DIR on a tmpfs
(/dev/shm) for the directory cost alone, on a disk for that file system's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this tree's packages first
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_PER_SEED = 50_000


def _tree(base: str, classes: int, per_class: int) -> str:
    data = os.path.join(base, "data")
    marker = os.path.join(base, f".done-{classes}x{per_class}")
    if os.path.exists(marker):
        return data
    import numpy as np

    from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
    os.makedirs(base, exist_ok=True)
    seeds = []
    for k in range((classes * per_class + _PER_SEED - 1) // _PER_SEED):
        seeds.append(os.path.join(base, f"seed_{k}.jpg"))
        with open(seeds[-1], "wb") as f:
            f.write(encode_jpeg(photo_like(np.random.default_rng(k), 64, 64)))
    for c in range(classes):
        folder = os.path.join(data, f"class_{c:04d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            target = os.path.join(folder, f"img_{i:06d}.jpg")
            if not os.path.exists(target):
                os.link(seeds[(c * per_class + i) // _PER_SEED], target)
    open(marker, "w").close()
    return data


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _round(data: str, times: dict[str, list[float]]) -> int:
    from torchvision.datasets import ImageFolder

    from dali_pipes.sources.image import ImageFolderSource
    t, theirs = _timed(lambda: ImageFolder(data))
    times["torchvision ImageFolder"].append(t)
    t, lazy = _timed(lambda: ImageFolderSource(data))
    times["ours, lazy (default): listing"].append(t)
    t, _ = _timed(lazy.listing_digest)
    times["ours, lazy: first digest (stat pass)"].append(t)
    t, eager = _timed(lambda: ImageFolderSource(data, file_stats="listing"))
    times['ours, file_stats="listing"'].append(t)
    if not len(theirs) == len(lazy) == len(eager):
        raise SystemExit(f"listings differ: {len(theirs)}, {len(lazy)}, {len(eager)} files")
    if lazy.listing_digest() != eager.listing_digest():
        raise SystemExit("the lazy and the eager digests differ")
    return len(lazy)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--per-class", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    data = _tree(args.dir, args.classes, args.per_class)
    times: dict[str, list[float]] = {k: [] for k in (
        "torchvision ImageFolder", "ours, lazy (default): listing",
        "ours, lazy: first digest (stat pass)", 'ours, file_stats="listing"')}
    for _ in range(args.rounds):
        n = _round(data, times)
    base = statistics.median(times["torchvision ImageFolder"])
    print(f"{n} files in {args.classes} class folders under {data} "
          f"({args.rounds} interleaved rounds; seconds)")
    print(f"| {'what':38s} | median | best | median / ImageFolder's |")
    print(f"|{'-' * 40}|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"| {name:38s} | {med:.3f} | {min(values):.3f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
