"""Benchmark: what masks (and semantic maps) cost the detection loader, per backend.

Runs the DALI and torch loaders on the built-in detection set
(`dali_pipes.sample_data.sample_detection`)
with and without `masks=True` (and `semantic=True`), in interleaved rounds in this one
process, and prints samples/s per configuration (medians) and each one's ratio to the
plain DALI loader measured in the same run.

    python bench/studies/bench_detection.py [--images 192] [--batch-size 16] [--size 384]
                                    [--rounds 3] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dali_pipes.sample_data.sample_detection import detection_dataset  # noqa: E402
from torch_bridge import make_loader  # noqa: E402

CONFIGS = {"plain": {}, "masks": {"masks": True},
           "masks+semantic": {"masks": True, "semantic": True}}


def _rate(data: Path, backend: str, options: dict, args) -> float:
    """Samples/s of one whole epoch (after a first batch that builds the pipeline)."""
    extra = {"reference": {"num_workers": 2}} if backend == "torch" else {}
    loader = make_loader("detection", data, backend=backend, batch_size=args.batch_size,
                         size=args.size, seed=0, **options, **extra)
    it = iter(loader)
    next(it)
    t0, samples = time.perf_counter(), 0
    for batch in it:
        samples += len(batch["index"])
    rate = samples / (time.perf_counter() - t0)
    loader.close()
    return rate


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=192)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--size", type=int, default=384)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    data = detection_dataset(n_images=args.images)
    rates: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for backend in ("dali", "torch"):
            for name, options in CONFIGS.items():
                rates.setdefault(f"{backend} {name}", []).append(
                    _rate(data, backend, options, args))
    base = float(np.median(rates["dali plain"]))
    print(f"{'loader':<22} {'samples/s':>10} {'vs dali plain':>14}")
    result = {}
    for key, values in rates.items():
        median = float(np.median(values))
        result[key] = {"samples_per_s": median, "rounds": values, "vs_dali_plain": median / base}
        print(f"{key:<22} {median:>10.1f} {median / base:>14.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
