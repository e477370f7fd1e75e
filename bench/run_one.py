"""Measure one loader in this process (compare.py starts one such process per backend).

Prints JSON lines on stdout: {"event": "step", ...} while it runs, then one
{"event": "result", ...}. Running each backend in its own process keeps CPU, memory and
worker processes of one backend out of the next one's numbers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.args import loader_parser  # noqa: E402, F401  (diagnose.py and tune.py use it)
from bench.metrics import ResourceSampler, gpu_index  # noqa: E402
from torch_bridge import registry  # noqa: E402

# the last five: bench/peers.py (with --modality video, torchcodec and pyav: bench/peers_video.py)
BACKENDS = ("dali", "torch", "classic", "dali-stock", "adapter", "usual", "ffcv", "spdl",
            "torchcodec", "pyav", "decode-ceiling")
DEFAULT_SIZE = 224  # with --recipe, --size at this default leaves the recipe's size


def build(backend: str, args):
    """The loader under test: an iterable of dict batches with a "label" field."""
    common = dict(batch_size=args.batch_size, device=args.device, seed=args.seed)
    if backend in ("dali", "torch"):
        from torch_bridge import make_loader
        extra = {"config": args.config} if backend == "dali" else {
            "reference": {"num_workers": args.workers}}
        extra["on_error"] = getattr(args, "on_error", "raise")
        extra.update(json.loads(getattr(args, "options", None) or "{}"))  # --options
        recipe = getattr(args, "recipe", None)
        if recipe is not None:
            extra["recipe"] = recipe
        if "size" in registry.get(args.modality).options() and (  # not every modality has one
                recipe is None or args.size != DEFAULT_SIZE):
            extra["size"] = args.size
        return make_loader(args.modality, args.data, backend=backend, **common, **extra)
    if backend == "usual":
        from bench.baselines import usual_loader
        if getattr(args, "recipe", None) is None:
            raise ValueError("backend 'usual' needs --recipe (it is a recipe's baseline)")
        return usual_loader(args.data, recipe=args.recipe, num_workers=args.workers,
                            size=None if args.size == DEFAULT_SIZE else args.size, **common)
    if backend == "classic":
        from bench.baselines import classic_loader
        return classic_loader(args.data, size=args.size, num_workers=args.workers, **common)
    if backend == "dali-stock":
        from bench.baselines import dali_stock_loader
        return dali_stock_loader(args.data, size=args.size, num_threads=args.threads, **common)
    if backend in ("torchcodec", "pyav") and args.modality == "video":
        from bench.peers_video import video_peer_loader
        return video_peer_loader(backend, args.data, size=args.size, num_workers=args.workers,
                                 options=json.loads(getattr(args, "options", None) or "{}"),
                                 **common)
    if backend in ("ffcv", "spdl", "torchcodec", "pyav", "decode-ceiling"):
        from bench.peers import peer_loader
        return peer_loader(backend, args.data, size=args.size, num_workers=args.workers,
                           **common)
    if backend == "adapter":
        from bench.bench_adapter import FileDataset
        from dali_pipes.sources import ImageFolderSource
        from torch_bridge.integrations.adapter import dali_from_dataset
        source = ImageFolderSource(args.data)
        ds = FileDataset(list(source.files), source.labels)
        sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
        return dali_from_dataset(ds, sampler, size=args.size, num_workers=args.workers,
                                 config=args.config, **common)
    raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


def endless(loader):
    """The loader's batches, epoch after epoch."""
    while True:  # as many epochs as the step count needs
        yield from loader


def measure(backend: str, args) -> dict:
    cuda = args.device.startswith("cuda")
    loader = build(backend, args)
    want_stages = getattr(args, "stages", False)  # tune.py passes its own Namespace
    stages = None
    if want_stages:  # --stages: time read / decode+augment / transfer (bench/stages.py)
        from bench.stages import instrument
        stages = instrument(backend, loader)
    stream = endless(loader)
    for _ in range(args.warmup):
        next(stream)
    if stages is not None:
        stages.reset()
    waits, samples = [], 0
    gpu = gpu_index(args.device)  # the CUDA device the loader uses (LOCAL_RANK aware)
    with ResourceSampler(gpu_index=gpu) as res:
        for step in range(args.steps):
            t0 = time.perf_counter()
            batch = next(stream)
            if cuda:
                torch.cuda.synchronize()
            waits.append(time.perf_counter() - t0)
            samples += len(batch["label" if "label" in batch else "index"])  # detection: no label
            if step % 5 == 4 or step == args.steps - 1:
                print(json.dumps({"event": "step", "done": step + 1}), flush=True)
    waits_ms = np.asarray(waits) * 1e3
    result = {"backend": backend, "samples_per_s": samples / res.wall,
              "wait_ms_p50": float(np.percentile(waits_ms, 50)),
              "wait_ms_p95": float(np.percentile(waits_ms, 95)),
              "cpu_percent": res.cpu_percent, "gpu_util_percent": res.gpu_util_percent,
              "peak_rss_mb": res.peak_rss / 2**20, "steps": args.steps, "samples": samples,
              "gpu_note": res.gpu_note,
              "cpu_ms_per_sample": 1e3 * res.cpu_seconds / samples if samples else None}
    skipped = getattr(loader, "skipped", None)  # on_error="skip": samples left out
    result["skipped"] = None if skipped is None else len(skipped)
    if want_stages:
        from bench.stages import empty_stages
        result["stages"] = stages.summary(args.steps, samples, waits) if stages is not None \
            else empty_stages()
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", choices=BACKENDS, required=True)
    p.add_argument("--modality", choices=registry.names(), default="image")
    p.add_argument("--data", required=True)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipe", default=None, help="image training recipe (a preset name or "
                   "a TOML path) for dali, torch and usual")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch paths)")
    p.add_argument("--threads", type=int, default=2, help="DALI threads (stock DALI)")
    p.add_argument("--config", default=None, help="decode preset for our DALI backend")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise",
                   help="bad samples (our dali and torch loaders): raise or skip")
    p.add_argument("--stages", action="store_true",
                   help="also time read / decode+augment / transfer (bench/stages.py)")
    p.add_argument("--prebuilt", action="store_true", help="the native operators were "
                   "compiled already (compare.py does it once); else they are compiled "
                   "here, before anything is timed, where missing")
    p.add_argument("--options", help="more make_loader options for our dali and torch "
                   "loaders, as a JSON object (storage_options, cache_dir, ...)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if not args.prebuilt and args.backend in ("dali", "adapter"):
        from dali_pipes.native.prebuild import prebuild
        prebuild(say=lambda line: print(line, file=sys.stderr, flush=True))
    result = measure(args.backend, args)
    print(json.dumps({"event": "result", **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
