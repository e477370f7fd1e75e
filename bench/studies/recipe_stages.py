"""What each stage of a training recipe costs: images/s of the DALI and torch backends with
each stage added alone to timm-rand-m9's RRC + flip, or removed from timm-rand-m9.

    python bench/studies/recipe_stages.py [--data PATH] [--batch-size 64] [--steps 6] [--warmup 2]
                                  [--repeats 2] [--json PATH] [--only NAME ...]

Every configuration is a recipe TOML (written to a temporary folder) measured by
bench/run_one.py in its own process, as compare.py does; rounds are interleaved (every
configuration and backend once, then again) and the table shows medians of images/s and
of CPU ms per image (the loader's whole process tree), with dali / torch. The built-in
sample set by default (640 JPEGs of 500x375).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parents[1]))

from bench.compare import BackendFailed, run_backend  # noqa: E402
from bench.metrics import LoadMonitor  # noqa: E402

BASE = {"interpolation": "bicubic"}  # timm-rand-m9's RRC + flip, nothing else
POLICY = {"auto_augment": "randaugment", "num_ops": 2, "magnitude": 9, "magnitude_std": 0.5}
ERASING = {"erasing": 0.25, "erasing_value": "random"}
MIXING = {"mixup": 0.8, "cutmix": 1.0, "switch_prob": 0.5, "label_smoothing": 0.1}
FORMAT = {"dtype": "float16", "memory_format": "channels_last"}
JITTER = {"color_jitter": [0.4, 0.4, 0.4]}
TIMM = {**BASE, **POLICY, **ERASING, **MIXING}
CONFIGS: dict[str, dict] = {
    "default recipe": {},
    "RRC+flip (bicubic)": BASE,
    "+ randaugment": {**BASE, **POLICY},
    "+ erasing": {**BASE, **ERASING},
    "+ mixup/cutmix": {**BASE, **MIXING},
    "+ float16 channels_last": {**BASE, **FORMAT},
    "+ colour jitter 0.4": {**BASE, **JITTER},
    "timm-rand-m9": TIMM,
    "- randaugment": {**BASE, **ERASING, **MIXING},
    "- erasing": {**BASE, **POLICY, **MIXING},
    "- mixup/cutmix": {**BASE, **POLICY, **ERASING},
}


def toml_text(options: dict) -> str:
    """A recipe file holding `options` (str, number or list values)."""
    def value(v) -> str:
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)
    return "".join(f"{k} = {value(v)}\n" for k, v in options.items())


def write_recipes(folder: Path, names: list[str]) -> dict[str, Path]:
    """One TOML per configuration in `folder`: name -> path."""
    paths = {}
    for i, name in enumerate(names):
        paths[name] = folder / f"stage{i}.toml"
        paths[name].write_text(toml_text(CONFIGS[name]))
    return paths


def measure_all(args, data: Path, recipes: dict[str, Path]) -> dict[str, dict[str, list]]:
    """name -> backend -> [result per round] (interleaved rounds)."""
    out: dict[str, dict[str, list]] = {n: {"dali": [], "torch": []} for n in recipes}
    for r in range(args.repeats):
        for name, path in recipes.items():
            for backend in ("dali", "torch"):
                run_args = argparse.Namespace(**{**vars(args), "recipe": str(path),
                                                 "modality": "image", "config": None,
                                                 "threads": 2, "size": 224,
                                                 "on_error": "raise", "stages": False})
                print(f"round {r + 1}/{args.repeats}: {name} on {backend}", file=sys.stderr)
                try:
                    out[name][backend].append(run_backend(backend, run_args, data, "cpu",
                                                          lambda done: None))
                except BackendFailed as exc:
                    print(f"recipe_stages.py: {name} on {backend} failed: {exc.cause}",
                          file=sys.stderr)
    return out


def summary(runs: dict[str, dict[str, list]]) -> list[dict]:
    """One row per configuration: medians and [min, max] of images/s and CPU ms."""
    import numpy as np
    rows = []
    for name, per in runs.items():
        row: dict = {"config": name, "options": CONFIGS[name]}
        for backend, results in per.items():
            rates = [r["samples_per_s"] for r in results]
            cpu = [r["cpu_ms_per_sample"] for r in results]
            row[backend] = {"images_per_s": float(np.median(rates)) if rates else None,
                            "images_per_s_range": [min(rates), max(rates)] if rates else None,
                            "cpu_ms_per_image": float(np.median(cpu)) if cpu else None}
        d, t = row["dali"]["images_per_s"], row["torch"]["images_per_s"]
        row["dali_over_torch"] = d / t if d and t else None
        rows.append(row)
    return rows


def print_rows(rows: list[dict]) -> None:
    """A markdown table (docs/recipes.md takes it as is)."""
    print("| configuration | dali images/s (min-max) | torch images/s (min-max) | dali / torch "
          "| CPU ms per image: dali / torch |")
    print("|---|---|---|---|---|")
    for row in rows:
        cells = []
        for backend in ("dali", "torch"):
            m = row[backend]
            rng = m["images_per_s_range"]
            cells.append("failed" if m["images_per_s"] is None else
                         f"{m['images_per_s']:.0f} ({rng[0]:.0f}-{rng[1]:.0f})")
        ratio = "-" if row["dali_over_torch"] is None else f"{row['dali_over_torch']:.2f}"
        cpu = " / ".join("-" if row[b]["cpu_ms_per_image"] is None else
                         f"{row[b]['cpu_ms_per_image']:.2f}" for b in ("dali", "torch"))
        print(f"| {row['config']} | {cells[0]} | {cells[1]} | {ratio} | {cpu} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, help="image class folders (default: built-in set)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch path)")
    p.add_argument("--json", type=Path)
    p.add_argument("--only", nargs="+", choices=list(CONFIGS), help="a subset of the rows")
    args = p.parse_args(argv)
    if args.data is None:
        from dali_pipes.sample_data.sample_images import image_dataset
        args.data = image_dataset()
    with tempfile.TemporaryDirectory() as tmp, LoadMonitor() as load:
        recipes = write_recipes(Path(tmp), args.only or list(CONFIGS))
        rows = summary(measure_all(args, args.data, recipes))
    print_rows(rows)
    if load.busy:
        print(load.warning(), file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "load": load.summary(),
                                         "settings": {k: str(v) for k, v in vars(args).items()}},
                                        indent=2) + "\n")
    return 0 if all(row["dali_over_torch"] is not None for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
