"""One run of bench/studies/remote_speed.py, in a process of its own: a remote loader side by
side with the local one, or the raw GET ceiling of a server.

    pair: --spec JSON {"modality", "backend", "local", "remote" (paths, URLs or lists),
          "options", "remote_options", "epochs", "cold_first"}: both loaders made; the
          local loader's first epoch and the remote loader's first (`cold`: its cache_dir
          empty; before the local one with `cold_first`), then `epochs` epochs of each in
          turn, the first of each pair alternating (`local`, `warm`): samples/s and CPU ms
          per sample (this process and its workers) of every epoch, and the bytes the
          block cache holds after the cold epoch.
    raw:  --spec JSON {"raw": true, "objects": [[url, size], ...], "options",
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
    from dali_pipes.stores.block_cache import BlockCache
    folder = options.get("cache_dir")
    if not folder or not Path(folder).is_dir():
        return None
    return BlockCache(folder).size()


def epoch(loader, number: int) -> dict:
    """One timed epoch: samples/s and CPU ms per sample of the process tree."""
    from bench.metrics import ResourceSampler
    loader.set_epoch(number)
    samples = 0
    with ResourceSampler(interval=0.5) as res:
        for batch in loader:
            samples += len(batch["index"])
    print(json.dumps({"event": "step", "done": number}), flush=True)
    return {"samples": samples, "seconds": res.wall, "samples_per_s": samples / res.wall,
            "cpu_ms_per_sample": 1e3 * res.cpu_seconds / samples}


def pair_row(spec: dict) -> dict:
    from torch_bridge import make_loader
    options = {**spec.get("options", {}), "backend": spec["backend"]}
    remote_options = {**options, **spec["remote_options"]}
    local = make_loader(spec["modality"], spec["local"], **options)
    remote = make_loader(spec["modality"], spec["remote"], **remote_options)
    out: dict = {}
    for name, loader in ((("cold", remote), ("local_first", local)) if spec.get("cold_first")
                         else (("local_first", local), ("cold", remote))):
        out[name] = epoch(loader, 0)
    out["cold"]["cache_bytes"] = cache_bytes(remote_options)
    out["local"], out["warm"] = [], []
    for i in range(spec["epochs"]):
        order = [("local", local), ("warm", remote)]
        for name, loader in order if i % 2 == 0 else order[::-1]:
            out[name].append(epoch(loader, 1 + i))
    return out


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
    p.add_argument("--spec", required=True, help="the run, as JSON")
    spec = json.loads(p.parse_args(argv).spec)
    result = raw_row(spec) if spec.get("raw") else pair_row(spec)
    print(json.dumps({"event": "result", **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
