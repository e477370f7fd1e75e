"""Where does a training step's time go? Run a short training-like loop and name the bottleneck.

    python bench/diagnose.py [--modality image] [--data PATH] [--backend dali|torch]
                             [--config PRESET|PATH] [--workers N] [--steps N] [--warmup N]
                             [--batch-size N] [--size N] [--device cpu|cuda|auto]
                             [--compute-ms X [--compute-kind sleep|busy|matmul]
                              | --model tiny-cnn|resnet18]
                             [--disk-ceiling MB/s] [--json PATH]

The practice article's method (section 1.3): time next(loader) in every step, watch the GPU,
and tell disk I/O from CPU preprocessing from configuration. Each step is "wait" (blocked in
next(loader)) then "compute": a synthetic step of --compute-ms (sleep stands for an
accelerator busy while the CPU is free; busy spins a core; matmul multiplies on --device) or
a model forward/backward (--model; resnet18 needs torchvision). Meanwhile it records CPU use
per core, disk read throughput and utilisation from /proc/diskstats for the disk under
--data, the bytes workers hand to the main process (torch backend, estimated from the batch
tensors) and, with NVML, GPU, video-decoder and JPEG-engine utilisation.

classify() turns that evidence into a verdict; see THRESHOLDS for the rules.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))

# Rules, checked in this order (first match wins):
#   wait_fraction < compute_wait                               -> "compute"
#   disk util >= disk_util, or read MB/s >= disk_ceiling_fraction x --disk-ceiling -> "disk"
#   mean core busy >= cpu_busy, or loader tree CPU >= cpu_busy % of all cores      -> "cpu"
#   wait_fraction < balanced_wait                              -> "balanced"
#   otherwise (waiting while CPU and disk idle)                -> "transfer" (IPC / config)
THRESHOLDS = {"compute_wait": 0.10, "balanced_wait": 0.25, "disk_util": 80.0,
              "disk_ceiling_fraction": 0.8, "cpu_busy": 85.0}


@dataclass
class Evidence:
    """What one diagnosis run measured. Percentages are 0-100; None means not measured."""

    wait_fraction: float  # time in next(loader) over the whole step time
    wait_ms_p50: float = 0.0
    wait_ms_p95: float = 0.0
    compute_ms_p50: float = 0.0
    samples_per_s: float = 0.0
    cpu_cores: list[float] = field(default_factory=list)  # busy % per core, whole machine
    process_cpu_percent: float = 0.0  # loader process tree; 200 = two busy cores
    disk_device: str | None = None
    disk_read_mb_s: float | None = None
    disk_util_percent: float | None = None
    disk_ceiling_mb_s: float | None = None
    transfer_mb_s: float | None = None  # worker -> main process; None: no worker processes
    gpu_util_percent: float | None = None
    decoder_util_percent: float | None = None
    jpeg_util_percent: float | None = None
    backend: str = "dali"
    device: str = "cpu"

    @property
    def cpu_busy_percent(self) -> float:
        machine = sum(self.cpu_cores) / len(self.cpu_cores) if self.cpu_cores else 0.0
        tree = self.process_cpu_percent / max(1, len(self.cpu_cores))
        return max(machine, tree)


@dataclass(frozen=True)
class Diagnosis:
    bottleneck: str  # "disk" | "cpu" | "transfer" | "compute" | "balanced"
    evidence: list[str]
    next_step: str


ADVICE = {
    "compute": "The loader keeps up: the step itself is the limit. Speed up the model (AMP, "
               "channels_last, torch.compile, a larger batch); loader tuning will not help.",
    "disk": "Storage is saturated: keep the data set in RAM or the page cache, move it to "
            "faster local storage, pack small files into larger shards, or use fewer "
            "concurrent random readers; more decode threads will not help.",
    "cpu:dali:cpu": "Decoding and augmentation use every core: decode on the GPU "
                    "(--device cuda), try the 'throughput' preset (no antialiasing), or "
                    "shrink the output size; then bench/tune.py --params num_threads.",
    "cpu:dali:cuda": "The CPU side of DALI is saturated: raise hw_decoder_load so the "
                     "hardware JPEG decoder takes more images, and sweep num_threads with "
                     "bench/tune.py.",
    "cpu:torch": "The DataLoader workers use every core: switch to the DALI backend "
                 "(GPU decoding), or lower per-sample CPU work (smaller crops).",
    "transfer:torch": "Waiting while CPU and disk are idle: too few workers or too little "
                      "prefetch, or worker->main transfer. Raise num_workers, then "
                      "prefetch_factor (bench/tune.py --backend torch); keep "
                      "persistent_workers and pin_memory on.",
    "transfer:dali": "Waiting while CPU and disk are idle: too few DALI threads or too "
                     "shallow a prefetch queue. Sweep num_threads and prefetch_queue_depth "
                     "with bench/tune.py (py_num_workers for modalities read in Python).",
    "balanced": "Data and compute are close to balanced; sweep one knob at a time with "
                "bench/tune.py and keep the table of samples/s.",
}


def _advice(label: str, ev: Evidence) -> str:
    device = "cuda" if ev.device.startswith("cuda") else "cpu"
    for key in (f"{label}:{ev.backend}:{device}", f"{label}:{ev.backend}", label):
        if key in ADVICE:
            return ADVICE[key]
    return ADVICE["balanced"]


def _disk_lines(ev: Evidence, t: dict) -> tuple[bool, list[str]]:
    if ev.disk_device is None or ev.disk_util_percent is None:
        return False, ["disk: no block device found under the data folder (tmpfs, overlay or "
                       "network file system?); disk not measured"]
    near_ceiling = bool(ev.disk_ceiling_mb_s) and ev.disk_read_mb_s >= \
        t["disk_ceiling_fraction"] * ev.disk_ceiling_mb_s
    busy = ev.disk_util_percent >= t["disk_util"] or near_ceiling
    ceiling = f", ceiling {ev.disk_ceiling_mb_s:.0f} MB/s" if ev.disk_ceiling_mb_s else ""
    return busy, [f"disk {ev.disk_device}: {ev.disk_read_mb_s:.1f} MB/s read, busy "
                  f"{ev.disk_util_percent:.0f}% of the time (threshold {t['disk_util']:.0f}%"
                  f"{ceiling})"]


def classify(ev: Evidence, thresholds: dict | None = None) -> Diagnosis:
    """Name the bottleneck from measured evidence; pure, see THRESHOLDS for the rules."""
    t = {**THRESHOLDS, **(thresholds or {})}
    lines = [f"data wait {100 * ev.wait_fraction:.0f}% of step time (p50 {ev.wait_ms_p50:.1f}"
             f" ms, p95 {ev.wait_ms_p95:.1f} ms; compute-bound below "
             f"{100 * t['compute_wait']:.0f}%)"]
    disk_busy, disk = _disk_lines(ev, t)
    cpu_busy = ev.cpu_busy_percent >= t["cpu_busy"]
    lines += disk + [f"CPU busy {ev.cpu_busy_percent:.0f}% (max of machine mean over "
                     f"{len(ev.cpu_cores)} cores and loader tree; threshold "
                     f"{t['cpu_busy']:.0f}%)"]
    if ev.transfer_mb_s is not None:
        lines.append(f"worker->main transfer about {ev.transfer_mb_s:.2f} MB/s")
    if ev.gpu_util_percent is not None:
        lines.append(f"GPU busy {ev.gpu_util_percent:.0f}%")
    if ev.wait_fraction < t["compute_wait"]:
        label = "compute"
    elif disk_busy:
        label = "disk"
    elif cpu_busy:
        label = "cpu"
    elif ev.wait_fraction < t["balanced_wait"]:
        label = "balanced"
    else:
        label = "transfer"
    return Diagnosis(label, lines, _advice(label, ev))


def parse_args(argv=None) -> argparse.Namespace:
    from bench.run_one import loader_parser
    p = loader_parser(__doc__)
    p.add_argument("--config", help="DALI decode preset name or TOML path")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch)")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=224, help="output size (image)")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    step = p.add_mutually_exclusive_group()
    step.add_argument("--compute-ms", type=float, default=20.0,
                      help="synthetic step length in ms (0: pure loader)")
    step.add_argument("--model", choices=["tiny-cnn", "resnet18"],
                      help="a real forward/backward instead of the synthetic step")
    p.add_argument("--compute-kind", choices=["sleep", "busy", "matmul"],
                   help="synthetic step: default sleep on cpu, matmul on cuda")
    p.add_argument("--disk-ceiling", type=float, help="known disk read ceiling in MB/s")
    p.add_argument("--json", type=Path, help="also write evidence, verdict and steps here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        report = run_diagnosis(args)
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        print(f"diagnose.py: {exc}", file=sys.stderr)
        return 1
    print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def make_step(args, device: str):
    """The training-like step: a callable taking a batch dict."""
    import time

    import torch
    if args.model:
        return _model_step(args.model, device)
    seconds = args.compute_ms / 1e3
    kind = args.compute_kind or ("matmul" if device.startswith("cuda") else "sleep")
    if seconds <= 0:
        return lambda batch: None
    if kind == "sleep":
        return lambda batch: time.sleep(seconds)
    a = torch.randn(256, 256, device=device)

    def spin(batch):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if kind == "matmul":
                (a @ a).sum().item()  # .item() waits for the GPU
    return spin


def _model_step(name: str, device: str):
    import torch
    if name == "resnet18":
        try:
            import torchvision
        except ImportError as exc:
            raise ImportError("--model resnet18 needs torchvision; try --model tiny-cnn") \
                from exc
        net_for = lambda c: torchvision.models.resnet18(num_classes=10)  # noqa: E731
    else:
        net_for = lambda c: torch.nn.Sequential(  # noqa: E731
            torch.nn.Conv2d(c, 32, 3, stride=2), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    state = {}

    def step(batch):
        x = next(v for k, v in batch.items() if k in ("image", "cube"))
        if "net" not in state:
            state["net"] = net_for(x.shape[1]).to(device)
            state["opt"] = torch.optim.SGD(state["net"].parameters(), lr=0.01)
        loss = state["net"](x).logsumexp(1).mean()
        state["opt"].zero_grad()
        loss.backward()
        state["opt"].step()
        loss.item()
    return step


def _timed_loop(loader, step, args, cuda: bool, on_step) -> dict:
    import time

    import torch

    from bench.metrics import worker_transfer_bytes
    from bench.run_one import _batches
    stream, sync = _batches(loader), (torch.cuda.synchronize if cuda else lambda: None)
    for _ in range(args.warmup):
        step(next(stream))
    sync()
    waits, computes, moved, samples = [], [], 0, 0
    for i in range(args.steps):
        t0 = time.perf_counter()
        batch = next(stream)
        sync()
        t1 = time.perf_counter()
        step(batch)
        sync()
        waits.append(t1 - t0)
        computes.append(time.perf_counter() - t1)
        samples += len(batch["index"])
        moved += worker_transfer_bytes(batch) if args.backend == "torch" else 0
        on_step(i + 1)
    return {"wait_s": waits, "compute_s": computes, "moved": moved, "samples": samples}


def build_loader(args, data, device: str):
    from torch_bridge import make_loader
    extra = {"size": args.size} if args.modality == "image" else {}
    if args.backend == "dali":
        extra["config"] = args.config
    else:
        extra["reference"] = {"num_workers": args.workers}
    return make_loader(args.modality, str(data), backend=args.backend,
                       batch_size=args.batch_size, device=device, **extra)


def measure(args, data, device: str) -> tuple[Evidence, dict]:
    """Run the loop under every probe and collect the evidence."""
    import numpy as np
    import psutil
    import torch
    from rich.progress import Progress

    from bench.metrics import DiskSampler, EngineSampler, ResourceSampler, per_core_busy
    cuda = device.startswith("cuda")
    gpu = (torch.device(device).index or 0) if cuda else None
    loader, step = build_loader(args, data, device), make_step(args, device)
    with Progress(transient=True) as progress:
        task = progress.add_task(f"diagnosing {args.backend}", total=args.steps)
        cores0 = psutil.cpu_times(percpu=True)
        with ResourceSampler(gpu_index=gpu) as res, DiskSampler(data) as disk, \
                EngineSampler(gpu) as engines:
            loop = _timed_loop(loader, step, args, cuda,
                               lambda done: progress.update(task, completed=done))
        cores = per_core_busy(cores0, psutil.cpu_times(percpu=True))
    wait_ms, compute_ms = np.array(loop["wait_s"]) * 1e3, np.array(loop["compute_s"]) * 1e3
    ev = Evidence(
        wait_fraction=float(wait_ms.sum() / max(1e-9, wait_ms.sum() + compute_ms.sum())),
        wait_ms_p50=float(np.percentile(wait_ms, 50)),
        wait_ms_p95=float(np.percentile(wait_ms, 95)),
        compute_ms_p50=float(np.percentile(compute_ms, 50)),
        samples_per_s=loop["samples"] / res.wall, cpu_cores=cores,
        process_cpu_percent=res.cpu_percent, disk_device=disk.device,
        disk_read_mb_s=disk.read_mb_s, disk_util_percent=disk.util_percent,
        disk_ceiling_mb_s=args.disk_ceiling,
        transfer_mb_s=loop["moved"] / 2**20 / res.wall if args.backend == "torch" else None,
        gpu_util_percent=res.gpu_util_percent, decoder_util_percent=engines.mean("decoder"),
        jpeg_util_percent=engines.mean("jpeg"), backend=args.backend, device=device)
    return ev, {"wait_ms": wait_ms.round(3).tolist(), "compute_ms": compute_ms.round(3).tolist()}


def run_diagnosis(args) -> dict:
    from bench.compare import resolve_device, sample_data
    device = resolve_device(args.device)
    data = Path(args.data) if args.data else sample_data(args.modality)
    if not data.exists():
        raise ValueError(f"--data {data}: folder does not exist")
    ev, steps = measure(args, data, device)
    dx = classify(ev)
    return {"evidence": {**asdict(ev), "cpu_busy_percent": ev.cpu_busy_percent},
            "diagnosis": asdict(dx), "thresholds": THRESHOLDS, "steps": steps,
            "settings": {k: (str(v) if isinstance(v, Path) else v)
                         for k, v in vars(args).items()} | {"data": str(data),
                                                             "device": device}}


def _fmt(v, unit="", digits=1) -> str:
    return "not measured" if v is None else f"{v:,.{digits}f}{unit}"


def print_report(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    ev, dx = report["evidence"], report["diagnosis"]
    table = Table(title=f"where the time goes: {ev['backend']} on {ev['device']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [("samples/s", _fmt(ev["samples_per_s"])),
            ("data wait, share of step", _fmt(100 * ev["wait_fraction"], "%", 0)),
            ("data wait p50 / p95", f"{ev['wait_ms_p50']:.1f} / {ev['wait_ms_p95']:.1f} ms"),
            ("compute p50", _fmt(ev["compute_ms_p50"], " ms")),
            ("CPU busy per core", " ".join(f"{c:.0f}%" for c in ev["cpu_cores"])),
            ("loader process tree CPU", _fmt(ev["process_cpu_percent"], "%", 0)),
            (f"disk read ({ev['disk_device'] or 'no device found'})",
             _fmt(ev["disk_read_mb_s"], " MB/s")),
            ("disk busy", _fmt(ev["disk_util_percent"], "%", 0)),
            ("worker->main transfer", _fmt(ev["transfer_mb_s"], " MB/s", 2) if
             ev["transfer_mb_s"] is not None else "none (no worker processes)"),
            ("GPU busy", _fmt(ev["gpu_util_percent"], "%", 0)),
            ("video decoder / JPEG engine", f"{_fmt(ev['decoder_util_percent'], '%', 0)} / "
                                            f"{_fmt(ev['jpeg_util_percent'], '%', 0)}")]
    for row in rows:
        table.add_row(*row)
    console = Console(width=None if Console().is_terminal else 110)
    console.print(table)
    console.print(f"[bold]bottleneck: {dx['bottleneck']}[/bold]")
    for line in dx["evidence"]:
        console.print(f"  - {line}")
    console.print(f"next: {dx['next_step']}")


if __name__ == "__main__":
    sys.exit(main())
