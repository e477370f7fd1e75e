"""The training-like loop: warm up, then time each step's wait in next(loader) and its
compute while every probe watches the timed steps only (not the warm-up, which includes
building the pipeline and starting workers)."""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from bench.diagnosis.classify import THRESHOLDS, Evidence, classify


def make_step(args, device: str):
    """The training-like step: a callable taking a batch dict."""
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


def build_loader(args, data, device: str):
    from torch_bridge import make_loader, registry
    extra = {"size": args.size} if "size" in registry.get(args.modality).options() else {}
    if args.backend == "dali":
        extra["config"] = args.config
    else:
        extra["reference"] = {"num_workers": args.workers}
    return make_loader(args.modality, str(data), backend=args.backend,
                       batch_size=args.batch_size, device=device, **extra)


def _timed_steps(loader, stream, step, args, sync, on_step) -> dict:
    """Run the timed steps. Each step's data wait is the loader's own counter of it
    (`loader.stats()["total"]["wait_ms"]`, the time in the engine), plus, on a GPU, the
    synchronisation after next() (the batch's asynchronous copy, which the counters do not
    see); samples, bytes read and time per stage come from the same counters."""
    from bench.metrics import worker_transfer_bytes
    waits, computes, moved = [], [], 0
    start = last = loader.stats()["total"]
    for i in range(args.steps):
        batch = next(stream)
        t0 = time.perf_counter()
        sync()
        t1 = time.perf_counter()
        step(batch)
        sync()
        computes.append(time.perf_counter() - t1)
        now = loader.stats()["total"]
        waits.append((now["wait_ms"] - last["wait_ms"]) / 1e3 + (t1 - t0))
        last = now
        moved += worker_transfer_bytes(batch) if args.backend == "torch" else 0
        on_step(i + 1)
    return {"wait_s": waits, "compute_s": computes, "moved": moved,
            "samples": last["samples"] - start["samples"],
            "bytes_read": None if last["bytes_read"] is None
            else last["bytes_read"] - start["bytes_read"],
            "stage_ms": {k: round(v - start["stage_ms"].get(k, 0.0), 3)
                         for k, v in last["stage_ms"].items()}}


def _evidence(args, device: str, loop: dict, res, disk, engines, cores) -> Evidence:
    import numpy as np
    wait_ms, compute_ms = np.array(loop["wait_s"]) * 1e3, np.array(loop["compute_s"]) * 1e3
    return Evidence(
        wait_fraction=float(wait_ms.sum() / max(1e-9, wait_ms.sum() + compute_ms.sum())),
        wait_ms_p50=float(np.percentile(wait_ms, 50)),
        wait_ms_p95=float(np.percentile(wait_ms, 95)),
        compute_ms_p50=float(np.percentile(compute_ms, 50)),
        samples_per_s=loop["samples"] / res.wall, cpu_cores=cores,
        process_cpu_percent=res.cpu_percent, disk_device=disk.device, disk_note=disk.note,
        disk_read_mb_s=disk.read_mb_s, disk_util_percent=disk.util_percent,
        disk_ceiling_mb_s=args.disk_ceiling, loader_read_mb_s=disk.loader_read_mb_s,
        transfer_mb_s=loop["moved"] / 2**20 / res.wall if args.backend == "torch" else None,
        gpu_util_percent=res.gpu_util_percent, decoder_util_percent=engines.mean("decoder"),
        jpeg_util_percent=engines.mean("jpeg"), backend=args.backend, device=device,
        stage_ms=loop["stage_ms"], bytes_read_mb_s=None if loop["bytes_read"] is None
        else loop["bytes_read"] / 2**20 / res.wall)


def measure(args, data, device: str) -> tuple[Evidence, dict]:
    """Warm up, then run the timed steps under every probe and collect the evidence."""
    import numpy as np
    import psutil
    import torch

    from bench.diagnosis.probes import DiskSampler, EngineSampler, per_core_busy
    from bench.metrics import ResourceSampler, gpu_index
    from bench.run_one import endless
    from dali_pipes.progress import progress_bar
    cuda = device.startswith("cuda")
    gpu = gpu_index(device)  # the CUDA device the loader uses (LOCAL_RANK aware)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    loader, step = build_loader(args, data, device), make_step(args, device)
    stream = endless(loader)
    for _ in range(args.warmup):
        step(next(stream))
    sync()
    with progress_bar(args.steps, f"diagnosing {args.backend}", unit="steps",
                      transient=True) as bar:
        cores0 = psutil.cpu_times(percpu=True)
        with ResourceSampler(gpu_index=gpu) as res, DiskSampler(data) as disk, \
                EngineSampler(gpu) as engines:
            loop = _timed_steps(loader, stream, step, args, sync, bar.update)
        cores = per_core_busy(cores0, psutil.cpu_times(percpu=True))
    ev = _evidence(args, device, loop, res, disk, engines, cores)
    return ev, {"wait_ms": (np.array(loop["wait_s"]) * 1e3).round(3).tolist(),
                "compute_ms": (np.array(loop["compute_s"]) * 1e3).round(3).tolist()}


def run_diagnosis(args) -> dict:
    """Measure and classify; the report dict that print_report and --json use."""
    from bench.compare import resolve_device, sample_data
    device = resolve_device(args.device)
    data = Path(args.data) if args.data else sample_data(args.modality)
    if not data.exists():
        raise ValueError(f"--data {data}: folder does not exist")
    ev, steps = measure(args, data, device)
    dx = classify(ev)
    derived = {name: getattr(ev, name) for name in
               ("cpu_busy_percent", "machine_cpu_percent", "loader_cpu_share")}
    return {"evidence": {**asdict(ev), **derived},
            "diagnosis": asdict(dx), "thresholds": dict(THRESHOLDS), "steps": steps,
            "settings": {k: (str(v) if isinstance(v, Path) else v)
                         for k, v in vars(args).items()} | {"data": str(data),
                                                             "device": device}}
