"""Listing and listing-digest time of an image source over a tree of hard links.

    python bench/studies/bench_listing.py DIR [--classes 60] [--per-class 1000] [--rounds 3]

Makes (once) DIR/data/class_k/img_i.jpg as hard links to one JPEG (classes x per-class files;
a file system allows about 65,000 links per inode), then times `ImageFolderSource(DIR/data)`
(the listing, with one stat per file) and `torch_bridge.loader._listing_digest` (the resume
fingerprint's listing part) and prints the best of `--rounds` of each, in seconds.
"""
from __future__ import annotations

import argparse
import os
import time

from dali_pipes.testing.sample_data import encode_jpeg, photo_like


def _tree(base: str, classes: int, per_class: int) -> str:
    data = os.path.join(base, "data")
    marker = os.path.join(base, f".done-{classes}x{per_class}")
    if os.path.exists(marker):
        return data
    import numpy as np
    os.makedirs(base, exist_ok=True)
    seed = os.path.join(base, "seed.jpg")
    with open(seed, "wb") as f:
        f.write(encode_jpeg(photo_like(np.random.default_rng(0), 64, 64)))
    for c in range(classes):
        folder = os.path.join(data, f"class_{c:04d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            target = os.path.join(folder, f"img_{i:06d}.jpg")
            if not os.path.exists(target):
                os.link(seed, target)
    open(marker, "w").close()
    return data


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--per-class", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from dali_pipes.sources.image import ImageFolderSource
    from torch_bridge.loader import _listing_digest

    data = _tree(args.dir, args.classes, args.per_class)
    listing, digest = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        source = ImageFolderSource(data)
        listing.append(time.perf_counter() - start)
        holder = type("Holder", (), {"source": source})()
        start = time.perf_counter()
        _listing_digest(holder)
        digest.append(time.perf_counter() - start)
    print(f"{len(source)} files: listing {min(listing):.3f} s, digest {min(digest):.3f} s "
          f"(best of {args.rounds})")


if __name__ == "__main__":
    main()
