"""Patch reads from memory maps against the naive path, side by side; handles over epochs.

    python bench/studies/bench_hyperspectral.py [--data PATH] [--samples N] [--patch-size P]
                                        [--epochs E] [--json PATH]

"memmap" is what both loaders do (HyperspectralSource.read: only the window's bytes,
reflect-padded, after a check that the file still holds them), also per format. "naive" is
the common mistake: open the file and load the whole cube for every sample, then
cut the patch. Both return the same patches (checked). With
--epochs, the DALI loader then runs that many epochs and the open file descriptors and RSS of
this process are printed after each: they must stay flat.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from dali_pipes.sources.hyperspectral import HyperspectralSource, cube_geometry, open_cube


def naive_patch(source: HyperspectralSource, index: int) -> np.ndarray:
    """Open the file, read the whole cube, cut and pad the patch, close."""
    scene = source.scenes[int(source.scene_ids[index])]
    y, x = (int(v) for v in source.positions[index])
    with open_cube(scene.path) as cube:
        bands, lines, samples = cube_geometry(cube)
        whole = cube.read_window(0, 0, lines, samples, scene.band_indices)
    r = source.patch_size // 2
    y0, y1, x0, x1 = max(0, y - r), min(lines, y + r + 1), max(0, x - r), min(samples, x + r + 1)
    pad = ((0, 0), (y0 - (y - r), y + r + 1 - y1), (x0 - (x - r), x + r + 1 - x1))
    return np.pad(whole[:, y0:y1, x0:x1], pad, mode="reflect").astype(source.dtype)


def rate(read, indices: np.ndarray, min_seconds: float = 1.0) -> float:
    """Patches per second of `read(index)` over `indices` (repeated to run >= min_seconds)."""
    done, start = 0, time.perf_counter()
    while True:
        for index in indices.tolist():
            read(index)
        done += len(indices)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done / elapsed


def compare_reads(source: HyperspectralSource, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    indices = rng.choice(len(source), size=min(n, len(source)), replace=False)
    for index in indices[:20].tolist():  # same patches both ways
        np.testing.assert_array_equal(source.read(index), naive_patch(source, index))
    fast = rate(source.read, indices)
    kinds = np.array([s.kind for s in source.scenes])[source.scene_ids[indices]]
    by_kind = {f"memmap_{kind}_patches_per_s": rate(source.read, indices[kinds == kind])
               for kind in sorted(set(kinds.tolist()))}
    naive = rate(lambda i: naive_patch(source, i), indices[: max(1, n // 20)])
    patch_bytes = source.n_bands * source.patch_size ** 2 * source.dtype.itemsize
    return {"memmap_patches_per_s": fast, **by_kind, "naive_patches_per_s": naive,
            "speedup": fast / naive, "patch_bytes": patch_bytes}


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def epochs_flat(data: Path, epochs: int, patch_size: int) -> list[dict]:
    """Open descriptors and peak RSS after each epoch of the DALI loader."""
    from torch_bridge import make_loader

    loader = make_loader("hyperspectral", data, backend="dali", batch_size=256,
                         patch_size=patch_size)
    rows = []
    for epoch in range(epochs):
        start, samples = time.perf_counter(), 0
        for batch in loader:
            samples += len(batch["index"])
        rows.append({"epoch": epoch, "samples_per_s": samples / (time.perf_counter() - start),
                     "open_fds": _open_fds(),
                     "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, help="scene folder (default: built-in sample scenes)")
    p.add_argument("--samples", type=int, default=2000, help="patches timed per method")
    p.add_argument("--patch-size", type=int, default=9)
    p.add_argument("--epochs", type=int, default=0, help="DALI loader epochs (handles, RSS)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.data is None:
        from dali_pipes.sample_data.sample_hyperspectral import hyperspectral_dataset
        args.data = hyperspectral_dataset()
    source = HyperspectralSource(args.data, patch_size=args.patch_size)
    report = {"data": str(args.data), "scenes": len(source.scenes), "samples": len(source),
              "bands": source.n_bands, "patch_size": args.patch_size,
              **compare_reads(source, args.samples)}
    print(f"{report['scenes']} scenes, {report['samples']} labeled pixels, {report['bands']} "
          f"bands, {args.patch_size}x{args.patch_size} patches ({report['patch_bytes']} B)")
    print(f"{'patch reads':<28}{'patches/s':>12}")
    print(f"{'memmap window (ours)':<28}{report['memmap_patches_per_s']:>12,.0f}")
    for kind in ("envi", "spe"):
        if f"memmap_{kind}_patches_per_s" in report:
            print(f"{f'  {kind.upper()} scenes only':<28}"
                  f"{report[f'memmap_{kind}_patches_per_s']:>12,.0f}")
    print(f"{'whole cube per sample':<28}{report['naive_patches_per_s']:>12,.0f}")
    print(f"memmap / naive: {report['speedup']:.0f}x")
    if args.epochs:
        report["epochs"] = epochs_flat(args.data, args.epochs, args.patch_size)
        for row in report["epochs"]:
            print(f"epoch {row['epoch']}: {row['samples_per_s']:,.0f} samples/s, "
                  f"{row['open_fds']} open fds, max RSS {row['max_rss_mb']:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
