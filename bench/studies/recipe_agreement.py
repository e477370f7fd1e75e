"""Per-operation pixel agreement of the image recipe operations between the DALI and the
torch backend (same parameters; differences come from the kernels).

    python bench/studies/recipe_agreement.py [--data PATH] [--size 64] [--batches 4]

For each operation alone (at strength 1, probability 1) and the plain transform, prints the
mean and the 99th percentile of |dali - torch| in uint8 levels (0..255) over the batches.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root, for `bench.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.studies.agreement import photo_folder  # noqa: E402

OPERATIONS = {
    "plain (crop + resize + flip)": {},
    "bicubic": {"interpolation": "bicubic"},
    "vflip": {"vflip": 1.0},
    "brightness 0.4": {"color_jitter": (0.4, 0, 0, 0)},
    "contrast 0.4": {"color_jitter": (0, 0.4, 0, 0)},
    "saturation 0.4": {"color_jitter": (0, 0, 0.4, 0)},
    "hue 0.1": {"color_jitter": (0, 0, 0, 0.1)},
    "grayscale": {"grayscale": 1.0},
    "blur k9 sigma 0.1-2": {"blur": 1.0},
    "trivialaugment": {"auto_augment": "trivialaugment"},
    "randaugment(2, 9)": {"auto_augment": "randaugment"},
    "autoaugment (ImageNet)": {"auto_augment": "autoaugment"},
}


def agreement(data, options: dict, *, size: int, batches: int) -> tuple[float, float]:
    """(mean, p99) of |dali - torch| in uint8 levels for one set of options."""
    from torch_bridge import make_loader

    common = dict(batch_size=16, size=size, seed=1, dtype="uint8", **options)
    dali = make_loader("image", data, backend="dali", **common)
    ref = make_loader("image", data, backend="torch", reference={"num_workers": 0}, **common)
    diffs = []
    for _, a, b in zip(range(batches), dali, ref, strict=False):
        diffs.append((a["image"].int() - b["image"].int()).abs().numpy().ravel())
    d = np.concatenate(diffs)
    return float(d.mean()), float(np.percentile(d, 99))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args(argv)
    data = args.data or photo_folder()
    print(f"{'operation':32s} {'mean':>6s} {'p99':>6s}  (|dali - torch|, uint8 levels)")
    for name, options in OPERATIONS.items():
        mean, p99 = agreement(data, options, size=args.size, batches=args.batches)
        print(f"{name:32s} {mean:6.2f} {p99:6.1f}")


if __name__ == "__main__":
    main()
