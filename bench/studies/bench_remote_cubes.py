"""Patches/s from an ENVI cube in S3 (moto on 127.0.0.1) against the local memory map.

    python bench/studies/bench_remote_cubes.py [--patches 2000] [--patch-size 9] [--rounds 3]

The built-in sample ENVI scene (int16, BIL, 200 x 200 pixels x 96 bands, 7.7 MB) is read
patch by patch (`HyperspectralSource.read`, the feed's read) in one seeded random
order of labeled pixels, side by side in one run: the local memory map; S3 with a cold
block cache (a fresh cache folder: the first pass fetches the blocks it touches); the
same order again on the warm cache; and S3 without a cache (every line of every window one
ranged GET, on a tenth of the patches). Wall time per pass, medians over rounds (each round
remakes the sources and the cold cache).
"""
from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def patches_per_s(read, order) -> float:
    start = time.perf_counter()
    for i in order:
        read(int(i))
    return len(order) / (time.perf_counter() - start)


def _round(local_dir: Path, url: str, options: dict, args, order) -> dict[str, float]:
    from dali_pipes.sources.hyperspectral import HyperspectralSource
    from dali_pipes.stores.remote import FsspecStore
    local = HyperspectralSource(local_dir, patch_size=args.patch_size)
    cache = Path(tempfile.mkdtemp(prefix="cube_cache-"))
    try:
        cached = HyperspectralSource(url, patch_size=args.patch_size, store=FsspecStore(
            storage_options=options, cache_dir=str(cache)))
        bare = HyperspectralSource(url, patch_size=args.patch_size,
                                   store=FsspecStore(storage_options=options))
        return {"local memory map": patches_per_s(local.read, order),
                "S3, cold block cache": patches_per_s(cached.read, order),
                "S3, warm block cache": patches_per_s(cached.read, order),
                "S3, no cache": patches_per_s(bare.read, order[:len(order) // 10])}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main(argv=None) -> int:
    import os

    import numpy as np

    from dali_pipes.sample_data.sample_hyperspectral import hyperspectral_dataset
    from tests.stores.servers import MotoS3
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--patches", type=int, default=2000)
    p.add_argument("--patch-size", type=int, default=9)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    sample = hyperspectral_dataset()
    work = Path(tempfile.mkdtemp(prefix="remote_cubes-"))
    local_dir = work / "scenes"
    local_dir.mkdir()
    for path in sample.glob("scene_00_envi*"):
        shutil.copy(path, local_dir / path.name)
    from dali_pipes.sources.hyperspectral import HyperspectralSource
    n = len(HyperspectralSource(local_dir, patch_size=args.patch_size))
    order = np.random.default_rng(0).integers(0, n, args.patches)
    rows: dict[str, list[float]] = {}
    with MotoS3() as s3:
        url = s3.put_tree(local_dir, "cubes", "scenes")
        for _ in range(args.rounds):
            for name, rate in _round(local_dir, url, s3.options, args, order).items():
                rows.setdefault(name, []).append(rate)
    local = statistics.median(rows["local memory map"])
    print(f"{args.patches} patches of {args.patch_size}x{args.patch_size} x 96 bands (int16 "
          f"BIL, 200x200 ENVI cube), medians of {args.rounds} rounds")
    print(f"{'store':<24} {'patches/s':>10} {'x local':>8}")
    for name, rates in rows.items():
        rate = statistics.median(rates)
        print(f"{name:<24} {rate:>10.0f} {rate / local:>8.2f}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
