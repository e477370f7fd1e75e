"""Agreement between the backends, per recipe operation: how far apart are the pixels?

    python bench/studies/agreement.py [--data PATH] [--images 32] [--size 64]
        [--graphs fused,dali-ops] [--no-policy] [--json bench/results/agreement.json]
        [--markdown PATH.md]

Each loader case builds the same batch (same files, same seed, so the same random
parameters) through `make_loader(..., backend="dali")` and `backend="torch"` with a recipe
that adds one operation to the plain training transform (random resized crop, bilinear,
horizontal flip 0.5). Each policy case applies one RandAugment operation at one magnitude to
the same decoded photo-like images, with the code each loader runs for it (the DALI graph's
policy step: the fused CPU operator or DALI's own operators; torch_bridge.recipes.policies): no
recipe option selects a single policy operation, so the policy presets are also run whole
through make_loader. "decode" compares the two JPEG
decoders alone (same files, no resize).

Per case: the mean, 99th percentile and maximum of |dali - torch| in uint8 levels (0..255;
normalized float outputs are mapped back with the recipe's mean and std), the fraction of
values that differ at all, and where the differences sit (`where`): the share of differing
values within 2 px of the border, the share on strong edges (top 10% of the reference's
gradient), the share that are 1 level, and the position of the largest one.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root, for `bench.*`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FIGURES = ("mean", "p99", "max", "fraction")
LOADER_CASES: dict[str, dict] = {
    "decode (JPEG only)": {"decode": True},
    "eval resize + centre crop": {"train": False},
    "random resized crop + hflip": {},
    "vflip": {"vflip": 1.0},
    "bicubic": {"interpolation": "bicubic"},
    "nearest": {"interpolation": "nearest"},
    "brightness 0.4": {"color_jitter": (0.4, 0, 0, 0)},
    "contrast 0.4": {"color_jitter": (0, 0.4, 0, 0)},
    "saturation 0.4": {"color_jitter": (0, 0, 0.4, 0)},
    "hue 0.1": {"color_jitter": (0, 0, 0, 0.1)},
    "grayscale": {"grayscale": 1.0},
    "blur": {"blur": 1.0},
    "erasing (const)": {"erasing": 1.0, "dtype": "float32"},
    "erasing (random)": {"erasing": 1.0, "erasing_value": "random", "dtype": "float32"},
    "mixup": {"mixup": 0.8, "num_classes": 4, "dtype": "float32"},
    "cutmix": {"cutmix": 1.0, "num_classes": 4, "dtype": "float32"},
    "float32 normalize": {"dtype": "float32"},
    "trivialaugment": {"auto_augment": "trivialaugment"},
    "randaugment(2, 9)": {"auto_augment": "randaugment"},
    "autoaugment": {"auto_augment": "autoaugment"},
}


def figures(dali: np.ndarray, ref: np.ndarray) -> dict:
    """The four figures of |dali - ref| (float arrays in levels, same shape (N, H, W, C))."""
    d = np.abs(dali.astype(np.float64) - ref.astype(np.float64))
    differ = d > 0.5 / 255 if not _integral(dali, ref) else d > 0
    return {"mean": float(d.mean()), "p99": float(np.percentile(d, 99)), "max": float(d.max()),
            "fraction": float(differ.mean())}


def _integral(*arrays: np.ndarray) -> bool:
    return all(np.array_equal(a, np.round(a)) for a in arrays)


def where(dali: np.ndarray, ref: np.ndarray) -> dict:
    """Where |dali - ref| is non-zero: border and edge shares, 1-level share, the maximum."""
    d = np.abs(dali.astype(np.float64) - ref.astype(np.float64))
    differ = d > 1e-3
    if not differ.any():
        return {}
    n, h, w, _ = d.shape
    border = np.zeros((h, w), bool)
    border[:2], border[-2:], border[:, :2], border[:, -2:] = True, True, True, True
    gray = ref.astype(np.float64).mean(axis=3)
    grad = np.hypot(*np.gradient(gray, axis=(1, 2)))
    edges = grad >= np.percentile(grad, 90)
    at = np.unravel_index(int(d.argmax()), d.shape)
    return {"border_share": float(differ[:, border, :].sum() / differ.sum()),
            "border_area": float(border.mean()),
            "edge_share": float(differ[edges].sum() / differ.sum()),
            "one_level_share": float((np.abs(d[differ] - 1) < 1e-3).sum() / differ.sum()),
            "max_at": {"sample": int(at[0]), "y": int(at[1]), "x": int(at[2]),
                       "channel": int(at[3]), "dali": float(dali[at]), "torch": float(ref[at])}}


def _levels(batch: dict, recipe) -> np.ndarray:
    """A batch's images as (N, H, W, C) float levels (0..255)."""
    x = batch["image"].float().numpy()
    if x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3):  # NCHW -> NHWC
        x = x.transpose(0, 2, 3, 1)
    if recipe.normalize:
        mean, std = recipe.pixel_mean_std()
        x = x * np.asarray(std) + np.asarray(mean)
    return x


def loader_case(data: Path, options: dict, *, images: int, size: int) -> tuple[np.ndarray, ...]:
    """(dali levels, torch levels) of the first batch of `images` under `options`."""
    from dali_pipes.recipes import image_recipe
    from torch_bridge import make_loader

    opts = {"dtype": "uint8", **options}
    common = dict(batch_size=images, size=size, seed=1, **opts)
    recipe = image_recipe(size=size, **opts)
    out = []
    for backend, extra in (("dali", {}), ("torch", {"reference": {"num_workers": 0}})):
        loader = make_loader("image", data, backend=backend, **common, **extra)
        out.append(_levels(next(iter(loader)), recipe))
    return tuple(out)


def decode_case(data: Path, images: int) -> tuple[np.ndarray, np.ndarray]:
    """DALI's CPU JPEG decoder against torchvision's decode_jpeg on the same files."""
    import nvidia.dali.fn as fn
    import torch
    from nvidia.dali import Pipeline
    from torchvision.io import decode_jpeg

    files = sorted(data.glob("*/*.jpg"))[:images]
    raw = [np.fromfile(f, np.uint8) for f in files]
    pipe = Pipeline(batch_size=len(raw), num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.decoders.image(fn.external_source(source=lambda: raw),
                                           device="cpu"))
    pipe.build()
    (out,) = pipe.run()
    dali = [np.asarray(out[i]) for i in range(len(raw))]
    ref = [decode_jpeg(torch.from_numpy(r)).permute(1, 2, 0).numpy() for r in raw]
    same = [(a, b) for a, b in zip(dali, ref, strict=True) if a.shape == b.shape]
    h = min(a.shape[0] for a, _ in same)
    w = min(a.shape[1] for a, _ in same)
    return (np.stack([a[:h, :w] for a, _ in same]).astype(np.float64),
            np.stack([b[:h, :w] for _, b in same]).astype(np.float64))


# besides policy_ops' extremes: RandAugment m9's factor (0.27) and AutoAugment's (0.8)
_MORE = [(name, m) for name in ("Brightness", "Color", "Contrast", "Sharpness")
         for m in (0.27, 0.8)]


def policy_cases() -> list[tuple[str, float]]:
    """(operation, magnitude) pairs: policy_ops' cases and _MORE, in OPS order."""
    from bench.studies.policy_ops import CASES
    from dali_pipes.recipes.policies import OP
    return sorted(CASES + _MORE, key=lambda c: OP[c[0]])


def policy_case(images: np.ndarray, name: str, magnitude: float,
                fused: bool | None = None) -> tuple[np.ndarray, ...]:
    """(DALI graph, torchvision) of one policy operation; `fused` False: DALI's own
    operators (the GPU's graph, and the CPU's without a compiler), else the fused one."""
    from bench.studies.policy_ops import dali_apply, torch_apply
    return (dali_apply(images, name, magnitude, fused).astype(np.float64),
            torch_apply(images, name, magnitude).astype(np.float64))


GRAPHS = {"fused": None, "dali-ops": False}  # the policy step's two DALI graphs


def _policy_name(name: str, magnitude: float, graph: str) -> str:
    return f"{name} {magnitude:g} ({graph})"


def case_names(graphs: tuple[str, ...] = tuple(GRAPHS)) -> list[str]:
    """Every case a full run measures, in order."""
    return list(LOADER_CASES) + [_policy_name(n, m, g) for g in graphs
                                 for n, m in policy_cases()]


def study(data: Path, *, images: int, size: int, policy: bool = True,
          graphs: tuple[str, ...] = tuple(GRAPHS), only: set[str] | None = None,
          say=print) -> dict:
    """Every case's figures and `where` (or those named in `only`), as the JSON's "cases"
    dict (name -> dict)."""
    cases: dict[str, dict] = {}
    if only is not None and only - set(case_names(graphs)):
        raise SystemExit(f"unknown case(s): {', '.join(sorted(only - set(case_names())))}")

    def wanted(name: str) -> bool:
        return only is None or name in only

    def record(name: str, kind: str, pair: tuple[np.ndarray, ...]) -> None:
        cases[name] = {"kind": kind, **figures(*pair), "where": where(*pair)}
        c = cases[name]
        say(f"{name:30s} {c['mean']:7.3f} {c['p99']:6.1f} {c['max']:6.1f} {c['fraction']:8.2%}")

    for name, options in LOADER_CASES.items():
        if not wanted(name):
            continue
        if options.get("decode"):
            record(name, "decode", decode_case(data, images))
        else:
            record(name, "loader", loader_case(data, options, images=images, size=size))
    if policy and (only is None or only - set(LOADER_CASES)):
        from bench.studies.policy_ops import test_images
        pixels = test_images(images, size)
        for graph in graphs:
            for name, m in policy_cases():
                if wanted(_policy_name(name, m, graph)):
                    record(_policy_name(name, m, graph), f"policy:{graph}",
                           policy_case(pixels, name, m, GRAPHS[graph]))
    return cases


def markdown_table(cases: dict) -> str:
    """The figures as a markdown table (levels 0..255)."""
    rows = ["| operation | mean | p99 | max | differ |", "|---|---|---|---|---|"]
    rows += [f"| {n} | {c['mean']:.3f} | {c['p99']:.1f} | {c['max']:.1f} | "
             f"{100 * c['fraction']:.2f}% |" for n, c in cases.items()]
    return "\n".join(rows) + "\n"


def environment() -> dict:
    """compare.py's environment record (CPU), with the date, the machine and torchvision."""
    import torchvision

    from bench.compare import environment as compare_environment
    return {"date": time.strftime("%Y-%m-%d"), **compare_environment("cpu"),
            "machine": platform.machine(), "torchvision": torchvision.__version__}


def photo_folder() -> Path:
    """The studies' default images: 64 photo-like JPEGs of 500x375 and 375x500 in 4 classes,
    in a new temporary folder."""
    from dali_pipes.sample_data.tiny_data import write_image_folder
    return write_image_folder(Path(tempfile.mkdtemp()) / "images", n_images=64, n_classes=4,
                              sizes=((375, 500), (500, 375)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, help="an image folder (default: 64 photo-like JPEGs "
                   "of 500x375 and 375x500 in a temporary folder)")
    p.add_argument("--images", type=int, default=32, help="images per case (one batch)")
    p.add_argument("--size", type=int, default=64, help="output side in pixels")
    p.add_argument("--no-policy", action="store_true", help="leave out the per-operation "
                   "policy cases")
    p.add_argument("--graphs", default="fused,dali-ops", help="policy cases: the fused CPU "
                   "operator, DALI's own operators, or both")
    p.add_argument("--only", help="comma-separated case names (default: every case)")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--markdown", type=Path, help="write the markdown table here")
    args = p.parse_args(argv)
    data = args.data or photo_folder()
    print(f"{'operation':30s} {'mean':>7s} {'p99':>6s} {'max':>6s} {'differ':>8s}")
    cases = study(data, images=args.images, size=args.size, policy=not args.no_policy,
                  graphs=tuple(args.graphs.split(",")),
                  only=set(args.only.split(",")) if args.only else None)
    report = {"command": "python bench/studies/agreement.py " + " ".join(
        sys.argv[1:] if argv is None else argv), "units": "uint8 levels (0..255)",
        "settings": {"images": args.images, "size": args.size}, "env": environment(),
        "cases": cases}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown_table(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
