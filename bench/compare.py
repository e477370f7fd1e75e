"""A/B benchmark: our DALI loader against the plain PyTorch path, side by side, in one run.

    python bench/compare.py [--modality image] [--data PATH | --sample default|large]
                            [--batch-size N] [--steps N]
                            [--device cpu|cuda|auto] [--json PATH] [--plot PATH.png]
                            [--backends dali,torch,dali:throughput,...] [--repeats N]
                            [--stages]

With no --data it creates a built-in sample data set once (cached) and runs on it
(`--sample large`: 48 photos of 3000-6000 px, half of them progressive). Each backend runs
in its own process; rounds are interleaved (backend A, B, A, B, ...; --repeats 3 by
default) and the table shows medians with the min-max spread. "CPU ms/sample" is the CPU
time of the loader's whole process tree (DataLoader or feed workers included) per sample:
on a shared machine it moves less than samples/s. The 1-minute load average is sampled
during the run; above the number of cores, a warning says the ratios are suspect. Warm-up
steps are excluded. "wait" is the time the training loop waits in next(loader) per step.
--stages adds a per-stage table (read, decode + augment, transfer) where the stages can be
measured.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))

from bench.metrics import LoadMonitor  # noqa: E402
from bench.report import print_table, speedups  # noqa: E402
from torch_bridge import registry  # noqa: E402

# "dali:<preset>" is our DALI backend with another decode preset.
DEFAULT_BACKENDS = {"image": ["dali", "torch", "classic", "dali-stock", "adapter",
                              "dali:throughput"],
                    "hyperspectral": ["dali", "torch"], "video": ["dali", "torch"],
                    "fusion": ["dali", "torch"]}
METRICS = ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "cpu_percent", "gpu_util_percent",
           "peak_rss_mb", "cpu_ms_per_sample")
SPREAD = ("samples_per_s", "cpu_ms_per_sample")  # reported as [min, max] over rounds


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modality", choices=registry.names(), default="image")
    p.add_argument("--data", help="your data folder (default: built-in sample data)")
    p.add_argument("--sample", choices=["default", "large"], default="default",
                   help="built-in image set when there is no --data: default (640 JPEGs of "
                   "500x375) or large (48 photos of 3000-6000 px, baseline and progressive)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=30, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before timing")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--json", type=Path, help="also write the results as JSON here")
    p.add_argument("--plot", type=Path, help="also write a PNG here: samples/s per backend "
                   "and data-wait distributions (bench/plots.py)")
    p.add_argument("--backends", help="comma-separated subset (default for images: dali, "
                   "torch, classic, dali-stock, adapter, dali:throughput); dali:<preset> "
                   "runs our DALI backend with that decode preset")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3); "
                   "medians with the min-max spread")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch paths)")
    p.add_argument("--threads", type=int, default=2, help="DALI threads for stock DALI")
    p.add_argument("--config", help="decode preset for our DALI backend (default: default)")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--stages", action="store_true", help="also time read, decode+augment and "
                   "transfer per batch where measurable (bench/stages.py) and print a second "
                   "table; adds a \"stages\" dict to each result")
    return p.parse_args(argv)


def resolve_device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def sample_data(modality: str, sample: str = "default") -> Path:
    from rich.progress import Progress

    if modality not in registry.REGISTRY:
        raise SystemExit(f"--modality {modality}: built-in sample data not available yet")
    spec = registry.get(modality)
    make, description = spec.sample_maker(), spec.sample_note
    if sample == "large":
        if modality != "image":
            raise SystemExit(f"--sample large: only for --modality image, not {modality}")
        from bench.sample_data import large_photo_dataset
        make, description = large_photo_dataset, "creating large sample photos (first run only)"
    with Progress(transient=True) as progress:
        task = progress.add_task(description, total=None)
        return make(progress=lambda done, total: progress.update(
            task, completed=done, total=total))


def run_backend(backend: str, args, data: Path, device: str, on_step) -> dict:
    name, _, preset = backend.partition(":")
    cmd = [sys.executable, str(HERE / "run_one.py"), "--backend", name,
           "--modality", args.modality, "--data", str(data), "--batch-size",
           str(args.batch_size), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--device", device, "--size", str(args.size), "--workers", str(args.workers),
           "--threads", str(args.threads)]
    if preset or args.config:
        cmd += ["--config", preset or args.config]
    if getattr(args, "stages", False):
        cmd.append("--stages")
    result, code, err = run_child(cmd, on_step)
    if code != 0 or result is None:
        raise RuntimeError(f"backend {backend!r} failed (exit {code}):\n{err[-3000:]}")
    result.pop("event")
    result["backend"] = backend
    return result


def run_child(cmd: list[str], on_step) -> tuple[dict | None, int, str]:
    """Run one measuring process; return (its result event, exit code, stderr text).

    stderr is drained by a thread while stdout is read, so a child that writes a lot to
    stderr (warnings, a traceback per bad sample) cannot fill the pipe and block.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_chunks: list[str] = []
    drain = threading.Thread(target=lambda: err_chunks.extend(iter(
        lambda: proc.stderr.read(65536), "")), daemon=True)
    drain.start()
    result = None
    for line in proc.stdout:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event["event"] == "step":
            on_step(event["done"])
        elif event["event"] == "result":
            result = event
    code = proc.wait()
    drain.join()
    return result, code, "".join(err_chunks)


def run_all(args, data: Path, device: str, backends: list[str]) -> list[dict]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rounds: dict[str, list[dict]] = {b: [] for b in backends}
    columns = (TextColumn("{task.description:<22}"), BarColumn(), TextColumn(
        "{task.completed}/{task.total} steps"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        for r in range(args.repeats):
            for backend in backends:
                label = f"{backend} (round {r + 1})" if args.repeats > 1 else backend
                task = progress.add_task(label, total=args.steps)
                rounds[backend].append(run_backend(
                    backend, args, data, device,
                    lambda done, t=task: progress.update(t, completed=done)))
                progress.remove_task(task)
    return [_median(rounds[b]) for b in backends]


def _median(results: list[dict]) -> dict:
    import numpy as np
    out = dict(results[0])
    for key in METRICS:
        values = [r[key] for r in results if r.get(key) is not None]
        out[key] = float(np.median(values)) if values else None
        if key in SPREAD:
            out[f"{key}_range"] = [float(min(values)), float(max(values))] if values else None
    if "stages" in out:  # --stages: the median of each stage too
        from bench.stages import median_stages
        out["stages"] = median_stages([r["stages"] for r in results])
    out["repeats"] = len(results)
    return out


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
    device = resolve_device(args.device)
    data = Path(args.data) if args.data else sample_data(args.modality, args.sample)
    backends = args.backends.split(",") if args.backends else DEFAULT_BACKENDS.get(
        args.modality, ["dali", "torch"])
    try:
        with LoadMonitor() as load:
            results = run_all(args, data, device, backends)
    except RuntimeError as exc:
        print(f"compare.py: {exc}", file=sys.stderr)
        return 1
    report = {"modality": args.modality, "device": device, "results": results,
              **speedups(results), "env": environment(device), "load": load.summary(),
              "settings": {"batch_size": args.batch_size, "steps": args.steps,
                           "warmup": args.warmup, "repeats": args.repeats,
                           "data": str(data), "size": args.size}}
    print_table(report)
    if load.busy:
        print(load.warning(), file=sys.stderr)
    if args.stages:
        from bench.stages import print_stages
        print_stages(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        from bench.plots import plot_compare
        plot_compare(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
