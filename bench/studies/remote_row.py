"""One row of bench/studies/remote_speed.py, in a process of its own: a loader's epochs, or
the raw GET ceiling of a server.

    loader: --spec JSON {"modality", "backend", "data" (a path, URL or list), "options",
            "warmup_epochs", "epochs"}: make_loader, `warmup_epochs` untimed epochs, then
            `epochs` timed; samples/s, CPU ms per sample (this process and its workers),
            peak RSS and, with a cache_dir, the bytes the cache holds after them.
    raw:    --spec JSON {"raw": true, "objects": [[url, size], ...], "options",
            "threads", "request"}: every byte of the objects read once by `threads` threads,
            `request` bytes a GET, through an FsspecStore without cache (the same client,
            retries and checks as the loaders); MB/s and requests/s.

Prints one JSON line {"event": "result", ...} (bench/launch.py reads it).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def cache_bytes(options: dict) -> int | None:
    """Bytes the block cache of `options` holds (None without one)."""
    folder = options.get("cache_dir")
    if not folder or not Path(folder).is_dir():
        return None
    return sum(p.stat().st_size for p in Path(folder).glob("*.blk"))


def loader_row(spec: dict) -> dict:
    from bench.metrics import ResourceSampler
    from torch_bridge import make_loader
    options = dict(spec.get("options") or {})
    loader = make_loader(spec["modality"], spec["data"], backend=spec["backend"], **options)
    for epoch in range(spec.get("warmup_epochs", 0)):
        loader.set_epoch(epoch)
        for _ in loader:
            pass
    samples = 0
    with ResourceSampler() as res:
        for epoch in range(spec["epochs"]):
            loader.set_epoch(spec.get("warmup_epochs", 0) + epoch)
            for batch in loader:
                samples += len(batch["index"])
                print(json.dumps({"event": "step", "done": samples}), flush=True)
    return {"samples": samples, "seconds": res.wall, "samples_per_s": samples / res.wall,
            "cpu_ms_per_sample": 1e3 * res.cpu_seconds / samples,
            "cpu_percent": res.cpu_percent, "peak_rss_mb": res.peak_rss / 2**20,
            "cache_bytes": cache_bytes(options)}


def raw_row(spec: dict) -> dict:
    from dali_pipes.stores.remote import FsspecStore
    store = FsspecStore(storage_options=spec.get("options") or {})
    step = int(spec["request"])
    jobs = [(url, at, min(step, size - at)) for url, size in spec["objects"]
            for at in range(0, size, step)]
    for url, _ in spec["objects"]:
        store.stat(url)  # as the loaders have them from their listing
    start = time.perf_counter()
    with ThreadPoolExecutor(spec["threads"]) as pool:
        got = sum(len(a) for a in pool.map(lambda j: store.read_range(*j), jobs))
    seconds = time.perf_counter() - start
    return {"bytes": got, "seconds": seconds, "mb_per_s": got / seconds / 1e6,
            "requests_per_s": len(jobs) / seconds}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True, help="the row, as JSON")
    spec = json.loads(p.parse_args(argv).spec)
    result = raw_row(spec) if spec.get("raw") else loader_row(spec)
    print(json.dumps({"event": "result", **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
