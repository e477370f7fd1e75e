"""What `adjust_orientation` and `alpha="keep"` cost, side by side in one run.

    python bench/studies/bench_decode_options.py [--images 48] [--repeats 3] [--size 224]

Writes a class folder of `--images` JPEGs (500 x 375 photo-like pictures, EXIF orientation
6) and as many RGBA PNGs of the same pictures into a temporary folder, then loads one
epoch of each set per option (default, adjust_orientation=True, alpha="keep"; on DALI
also alpha="keep" with 2 feed worker processes) on both backends, in turns, `--repeats`
times; prints the median images/s and each option's ratio to the default on the same
backend and set.
"""
from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OPTIONS = {"default": {}, "adjust_orientation": {"adjust_orientation": True},
           "alpha_keep": {"alpha": "keep"},
           # DALI only: the feeds (alpha planes included) prepared in 2 worker processes
           "alpha_keep_2_feed_workers": {"alpha": "keep", "config": {"py_num_workers": 2}}}


def write_sets(root: Path, n: int) -> dict[str, Path]:
    from PIL import Image

    from dali_pipes.sample_data.sample_images import photo_like
    rng = np.random.default_rng(0)
    sets = {"jpeg_o6": root / "jpeg", "rgba_png": root / "png"}
    for folder in sets.values():
        (folder / "c").mkdir(parents=True)
    exif = Image.Exif()
    exif[0x0112] = 6
    y, x = np.mgrid[:375, :500]
    alpha = ((x + y) % 256).astype(np.uint8)
    for i in range(n):
        pixels = photo_like(rng, 375, 500)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "JPEG", quality=90, exif=exif.tobytes())
        (sets["jpeg_o6"] / "c" / f"{i}.jpg").write_bytes(out.getvalue())
        Image.fromarray(np.dstack([pixels, alpha]), "RGBA").save(
            sets["rgba_png"] / "c" / f"{i}.png", compress_level=1)
    return sets


def one_epoch(folder: Path, backend: str, size: int, options: dict) -> float:
    """Images per second over one epoch (loader built outside the timing)."""
    from torch_bridge import make_loader
    extra = {"reference": {"num_workers": 2}} if backend == "torch" else {}
    loader = make_loader("image", folder, backend=backend, batch_size=16, size=size,
                         seed=0, **options, **extra)
    start, n = time.perf_counter(), 0
    for batch in loader:
        n += len(batch["index"])
    return n / (time.perf_counter() - start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sets = write_sets(Path(tmp), args.images)
        runs: dict[tuple[str, str, str], list[float]] = {}
        for _ in range(args.repeats):  # in turns: load drifts hit every option alike
            for name, folder in sets.items():
                for backend in ("dali", "torch"):
                    for option, kw in OPTIONS.items():
                        if backend == "torch" and "config" in kw:
                            continue
                        runs.setdefault((name, backend, option), []).append(
                            one_epoch(folder, backend, args.size, kw))
    print(f"{'set':10} {'backend':7} {'option':26} {'images/s':>9} {'x default':>9}")
    for (name, backend, option), values in runs.items():
        median = statistics.median(values)
        base = statistics.median(runs[(name, backend, "default")])
        print(f"{name:10} {backend:7} {option:26} {median:9.1f} {median / base:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
