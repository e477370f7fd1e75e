"""A/B benchmark: our DALI loader against the plain PyTorch path, side by side, in one run.

    python bench/compare.py [--modality image] [--data PATH | --sample default|large|real]
                            [--batch-size N] [--steps N]
                            [--device cpu|cuda|auto] [--json PATH] [--plot PATH.png]
                            [--backends dali,torch,dali:throughput,...] [--repeats N]
                            [--details] [--stages] [--on-error raise|skip]
                            [--recipe NAME|PATH.toml]

Before anything else it checks that torch, torchvision and DALI import and run here, and
stops with a few lines naming the one that does not and the pip command that fixes it. With
no --data it creates a built-in sample data set once (cached: a later run says so in one
line) and runs on it (`--sample large`: 48 photos of 3000-6000 px, half of them
progressive). Each backend runs in its own process; rounds are interleaved (backend A, B,
A, B, ...; --repeats 3 by default) and the table shows medians. Its columns are the
README's: samples/s (images/s, clips/s), "our DALI loader is" (dali's samples/s over the
row's: "3.04x faster") and "CPU ms / image", the CPU time of the loader's whole process tree
(DataLoader or feed workers included) per sample: on a shared machine it moves less than
samples/s. One line under the table says what each row is. --details adds the min-max over
the rounds, the time the training loop waits in next(loader) per step (p50, p95), memory
and GPU use. The 1-minute load average is sampled during the run; above the number of
cores, a warning says the ratios are suspect. Warm-up steps are excluded. --stages adds a
per-stage table (read, decode + augment, transfer) where the stages can be measured. Every
line fits 80 columns.
--on-error skip lets our dali and torch loaders skip bad files (counted in "skipped"). A
backend that fails is reported in one line (its last exception line, or the signal that
killed it) and the other rows still run; the exit code is then 1. Progress: a bar on a
terminal, plain lines on stderr otherwise, with an ETA once every row has run a round
(docs/tools.md).
--recipe (images) runs a training recipe (a preset or a TOML file, docs/recipes.md) on our
dali and torch backends and on "usual", the same recipe written the usual way (ImageFolder
+ PIL + torchvision.transforms.v2, 2 workers, timm-style mixup in the loop; speed only, its
randomness is its own); the JSON gains "recipe" and "recipe_speedups" (dali over torch and
over usual).
--peers (images) adds the other loaders' rows where they are installed (FFCV, SPDL,
torchcodec, PyAV: same output, each set up as its docs recommend) and "decode-ceiling", the
same images decoded whole by libjpeg-turbo without augmentation (bench/peers.py); a peer
that is not installed is skipped with one line.
--peers with --modality video adds torchcodec and PyAV rows (bench/peers_video.py): the same
clips of our plan decoded by each, scaled to --size in the decoder, in a DataLoader with
2 workers; --options '{"clip_length": 16, "stride": 2}' sets the clips of every row.
--options: more make_loader options of our dali and torch rows, as a JSON object (the video
peers take clip_length, stride and train from it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))

from bench.first_run import build_native  # noqa: E402
from bench.first_run import sample_data as _sample_data  # noqa: E402
from bench.launch import broken_environment  # noqa: E402
from bench.metrics import LoadMonitor  # noqa: E402
from bench.report import fit, print_table, speedups, write_json  # noqa: E402
from bench.rounds import (  # noqa: E402, F401  (studies and tests use all but run_all here)
    BackendFailed,
    last_error_line,
    median_row,
    run_all,
    run_backend,
)
from dali_pipes.cli import ArgumentParser, json_object  # noqa: E402
from torch_bridge import registry  # noqa: E402


def say(text: str) -> None:
    """A message on stderr, wrapped to 80 columns."""
    print(fit(text), file=sys.stderr, flush=True)


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, every option with its default (an option without
    one says in its help what happens when it is not given)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def parse_args(argv=None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__, formatter_class=_Help)
    p.add_argument("--modality", choices=registry.names(), default="image",
                   help="the kind of data")
    p.add_argument("--data", type=_existing_path,
                   help="your data folder (default: built-in sample data)")
    p.add_argument("--sample", choices=["default", "large", "real"], default="default",
                   help="built-in image set when there is no --data: default (640 JPEGs of "
                   "500x375), large (48 photos of 3000-6000 px, baseline and progressive) "
                   "or real (512 crops of real photos, 200-640 px; needs scikit-image)")
    p.add_argument("--batch-size", type=int, default=64, help="samples per batch")
    p.add_argument("--steps", type=int, default=30, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before timing")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto",
                   help="where batches go; auto: cuda when there is a GPU")
    p.add_argument("--json", type=Path, help="also write the results as JSON here")
    p.add_argument("--plot", type=Path, help="also write a PNG here: samples/s per backend "
                   "and data-wait distributions (bench/plots.py)")
    p.add_argument("--backends", help="comma-separated subset (default for images: dali, "
                   "torch, classic, dali-stock, adapter); dali:<preset> runs our DALI "
                   "backend with that decode preset, e.g. dali:throughput")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians "
                   "with the min-max spread")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch paths)")
    p.add_argument("--threads", type=int, default=2, help="DALI threads for stock DALI")
    p.add_argument("--config", help="decode preset for our DALI backend (None: default)")
    p.add_argument("--size", type=int, default=224, help="output image side in pixels")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise",
                   help="bad samples: raise (the row fails, with the cause) or skip them "
                   "(our dali and torch loaders; the table counts the skipped samples)")
    p.add_argument("--details", action="store_true", help="also print the min-max "
                   "over the rounds, the wait in next(loader) (p50, p95), memory and GPU use")
    p.add_argument("--stages", action="store_true", help="also time read, decode+augment and "
                   "transfer per batch where measurable (bench/stages.py) and print a second "
                   "table; adds a \"stages\" dict to each result")
    p.add_argument("--recipe", help="image training recipe: a preset name or a TOML path; "
                   "backends default to dali, torch, usual (with --size 224, the default, "
                   "the recipe's own size)")
    p.add_argument("--peers", nargs="?", const="all", help="images: add rows for FFCV, "
                   "SPDL, torchcodec and PyAV where installed and the decode-only ceiling "
                   "(bench/peers.py); video: torchcodec and PyAV (bench/peers_video.py); "
                   "or the comma-separated ones named; a missing peer is skipped with "
                   "one line")
    p.add_argument("--options", type=_json_object, help="more make_loader options for our "
                   "dali and torch rows, as a JSON object, e.g. '{\"clip_length\": 16}' "
                   "(video peers: clip_length, stride, train)")
    return p.parse_args(argv)


def _existing_path(text: str) -> str:
    """--data: `text` when it is a URL or something is there (argparse names the option
    otherwise), so a typo fails at once, not after the native operators are built and a row
    has started."""
    if "://" not in text and not Path(text).exists():
        raise argparse.ArgumentTypeError(f"{text}: does not exist")
    return text


def _json_object(text: str) -> str:
    """--options: `text` when it is a JSON object (argparse names the option otherwise)."""
    json_object(text)
    return text


def _peer_table(modality: str):
    """(peer names, their `unavailable`) of `modality`'s --peers rows."""
    if modality == "video":
        from bench import peers_video
        return peers_video.VIDEO_PEERS, peers_video.unavailable
    if modality != "image":
        raise SystemExit(f"--peers: only for --modality image or video, not {modality}")
    from bench import peers
    return peers.PEERS, peers.unavailable


def peer_rows(modality: str, wanted: str = "all", say=print) -> list[str]:
    """The --peers rows (`wanted`: "all" or comma-separated names) that can run here; one
    "skipped: ..." line (via `say`) for each other one."""
    known, unavailable = _peer_table(modality)
    names = list(known) if wanted == "all" else wanted.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"--peers: unknown {', '.join(unknown)} for --modality {modality}; "
                         f"expected 'all' or some of {', '.join(known)}")
    rows = []
    for peer in names:
        why = unavailable(peer)
        if why is None:
            rows.append(peer)
        else:
            say(f"skipped: {why}")
    return rows


RECIPE_BACKENDS = ["dali", "torch", "usual"]


def check_recipe(recipe: str, modality: str) -> None:
    """SystemExit naming the recipe and the known presets when it cannot be loaded."""
    from dali_pipes.recipes.files import load_recipe
    if modality != "image":
        raise SystemExit(f"--recipe: only for --modality image, not {modality}")
    try:
        load_recipe(recipe, train=True)
    except ValueError as exc:
        raise SystemExit(f"--recipe {recipe}: {exc}") from None


def recipe_speedups(results: list[dict]) -> dict:
    """{"vs torch": dali / torch, "vs usual": dali / usual} samples/s (None: a row missing)."""
    rate = {r["backend"]: r.get("samples_per_s") for r in results if "error" not in r}
    dali = rate.get("dali")
    return {f"vs {b}": dali / rate[b] if dali and rate.get(b) else None
            for b in ("torch", "usual")}


def resolve_device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def sample_data(modality: str, sample: str = "default") -> Path:
    """The cached built-in sample data set for `modality`, created (with progress) if absent;
    a cached one is announced in one line on stderr."""
    return _sample_data(modality, sample, say)


def uses_native(backends: list[str]) -> bool:
    """Whether a row runs our DALI graphs (which use the native operators)."""
    return any(b.partition(":")[0] in ("dali", "adapter") for b in backends)


def environment(device: str) -> dict:
    import nvidia.dali
    import torch
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "dali": nvidia.dali.__version__, "cpu_count": os.cpu_count(),
           "platform": platform.platform()}
    if device.startswith("cuda"):
        from bench.metrics import gpu_name
        env["gpu"] = gpu_name(str(device))  # the GPU the runs use, not CUDA device 0
    return env


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = broken_environment()  # before anything is made, built or forked
    if problem is not None:
        raise SystemExit(fit(f"compare.py: {problem}"))
    device = resolve_device(args.device)
    if args.recipe:
        check_recipe(args.recipe, args.modality)
    data = Path(args.data) if args.data else sample_data(args.modality, args.sample)
    backends = args.backends.split(",") if args.backends else RECIPE_BACKENDS if args.recipe \
        else list(registry.get(args.modality).compare_rows)
    if args.peers:
        backends += [p for p in peer_rows(args.modality, args.peers, say)
                     if p not in backends]
    if uses_native(backends):  # compiled here, once, before anything is timed
        build_native(say)
    with LoadMonitor() as load:
        results = run_all(args, data, device, backends)
    report = {"modality": args.modality, "device": device, "results": results,
              **speedups(results), "env": environment(device), "load": load.summary(),
              "settings": {"batch_size": args.batch_size, "steps": args.steps,
                           "warmup": args.warmup, "repeats": args.repeats,
                           "data": str(data), "size": args.size,
                           "on_error": args.on_error,
                           "options": json.loads(args.options or "{}")}}
    if args.recipe:
        report.update(recipe=args.recipe, recipe_speedups=recipe_speedups(results))
        report["settings"]["recipe"] = args.recipe
    print_table(report, details=args.details)
    if args.recipe:
        print(fit("recipe " + args.recipe + ": dali " + ", ".join(
            f"{k} {v:.2f}x" if v is not None else f"{k} -"
            for k, v in report["recipe_speedups"].items()) + " (samples/s)"))
    if load.busy:
        say(load.warning())
    measured = {**report, "results": [r for r in results if "error" not in r]}
    if args.stages and measured["results"]:
        from bench.stages import print_stages
        print_stages(measured)
    if args.json:
        write_json(args.json, report)
    if args.plot and measured["results"]:
        from bench.plots import plot_compare
        plot_compare(measured, args.plot)
    failed = [r["backend"] for r in results if "error" in r]
    if failed:
        say(f"compare.py: failed: {', '.join(failed)} (causes above and in the table)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
