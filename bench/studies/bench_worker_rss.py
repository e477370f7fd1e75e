"""Memory of the torch path's DataLoader workers: do forked workers copy the listing?

    python bench/studies/bench_worker_rss.py DATA [--batches 200] [--workers 2] [--size 224]

Makes `make_loader("image", DATA, backend="torch")` with persistent workers, takes one
batch, reads each worker's memory (psutil over the worker pids: RSS, and USS, the pages
only that process holds, so pages copied from the parent after the fork), takes `--batches`
more and reads it again. Prints one JSON line: the main process's RSS and, per worker, RSS
and USS after the first batch and after the last; and the listing itself, timed as
bench/studies/shard_listing_scale.py's loader probe times it (the same imports first, so
they are not counted; the workers start only with the first batch): `listing_seconds` and
`main_listing_mb`, the resident memory make_loader added.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _memory(proc) -> dict:
    info = proc.memory_full_info()
    return {"rss_mb": info.rss / 2**20, "uss_mb": info.uss / 2**20}


def workers_memory(data: str, *, batches: int, workers: int, size: int) -> dict:
    """Per-worker RSS/USS after the first batch and after `batches` more (MB)."""
    import psutil

    # imported before the listing is measured, as shard_listing_scale's probe does
    import torch  # noqa: F401
    import torchvision.transforms.v2  # noqa: F401

    import torch_bridge.engines.reference  # noqa: F401
    import torch_bridge.factory  # noqa: F401
    from torch_bridge import make_loader
    me = psutil.Process()
    start, t = me.memory_info().rss, time.perf_counter()
    loader = make_loader("image", data, backend="torch", batch_size=64, size=size,
                         reference={"num_workers": workers, "persistent_workers": True})
    listing_seconds = time.perf_counter() - t
    listed = me.memory_info().rss
    stream = _endless(loader)
    next(stream)
    pids = [p for p in me.children(recursive=True)]
    first = [_memory(p) for p in pids]
    t = time.perf_counter()
    for _ in range(batches):
        next(stream)
    seconds = time.perf_counter() - t
    last = [_memory(p) for p in pids]
    return {"data": data, "samples": len(loader.dataset), "batches": batches,
            "seconds": seconds, "listing_seconds": listing_seconds,
            "main_listing_mb": (listed - start) / 2**20,
            "main_rss_mb": me.memory_info().rss / 2**20,
            "workers": [{"first": a, "last": b} for a, b in zip(first, last, strict=True)]}


def _endless(loader):
    while True:
        yield from loader


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args(argv)
    print(json.dumps(workers_memory(args.data, batches=args.batches, workers=args.workers,
                                    size=args.size)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
