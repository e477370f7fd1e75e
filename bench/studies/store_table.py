"""Data at scale: one image set on every store, side by side; listings of 1M; worker memory.

    python bench/studies/store_table.py [--images 640] [--backends dali,torch] [--steps 30]
                                [--warmup 3] [--rounds 3] [--batch-size 64] [--no-s3]
                                [--listing-samples 1000000] [--worker-batches 200]
                                [--size 224] [--work DIR] [--scale-dir DIR] [--json PATH]

1. Throughput. The built-in image set (dali_pipes/sample_data/sample_images.py, 640 JPEGs of
   500x375) as `folder` (class folders), `shards` (`python -m dali_pipes.pack`, default shard size),
   `shards-320` (packed with `--max-side 320 --quality 90`), and the `shards` on S3 (moto's
   server on 127.0.0.1) read through the block cache: `s3-cold` with an empty `cache_dir`,
   `s3-warm` with the same `cache_dir` once more. Every row and backend runs in its own
   process (bench/run_one.py, as compare.py runs its rows), the default recipe; rounds are
   interleaved (every row once per round, the order rotated from round to round), so load
   noise hits every row; medians with the min-max over rounds, and each row's ratio to the
   folder row round by round. A cold cache is cold for one pass only, so `s3-cold` and `s3-warm`
   measure one pass (no warm-up, steps = batches per pass) and so does `folder-pass`, their
   reference row; "vs folder" divides by `folder` (or by `folder-pass` for those rows) of the
   same backend.
2. Listing. `--listing-samples` tiny JPEGs as shards of 10,000 with cached indexes and as
   files in class folders of 1,000 (written once under --scale-dir); listing time and
   resident memory growth in fresh processes, for the source alone and for make_loader
   (torch backend; measured in 3.'s process before its workers start, or with
   `--worker-batches 0` in a process of its own).
3. Worker memory. The torch backend on both listings: RSS and USS (pages only that process
   holds) of each DataLoader worker after the first batch and after `--worker-batches` more
   (bench/studies/bench_worker_rss.py).
Prints the tables; --json writes everything, with the settings, versions and load average.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parents[1]))

from bench import compare  # noqa: E402
from bench.launch import run_round  # noqa: E402
from bench.metrics import LoadMonitor  # noqa: E402
from bench.report import write_json  # noqa: E402

ROWS = ("folder", "shards", "shards-320", "folder-pass", "s3-cold", "s3-warm")
ONE_PASS = ("folder-pass", "s3-cold", "s3-warm")  # measured over one pass, no warm-up
SHARDS_PER_LISTING = 10_000


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=640, help="built-in images (default 640)")
    p.add_argument("--backends", default="dali,torch")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=30, help="timed steps (steady rows)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps (steady rows)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch)")
    p.add_argument("--size", type=int, default=224, help="output crop size")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--no-s3", action="store_true", help="leave out the S3 rows")
    p.add_argument("--listing-samples", type=int, default=1_000_000, help="0: no listing")
    p.add_argument("--worker-batches", type=int, default=200, help="0: no worker memory")
    p.add_argument("--work", type=Path, default=Path("/tmp/dali_pipes_store_table"),
                   help="packed shards and caches (rewritten)")
    p.add_argument("--scale-dir", type=Path, default=Path("/tmp/dali_pipes_scale"),
                   help="the listing trees (written once, kept)")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def prepare(args) -> dict[str, str]:
    """The local data of each row: the image folder and its two packings."""
    from dali_pipes.sample_data.sample_images import image_dataset
    folder = image_dataset(n_images=args.images)
    out = {"folder": str(folder)}
    for name, extra in (("shards", []), ("shards-320", ["--max-side", "320", "--quality", "90"])):
        dst = args.work / name
        shutil.rmtree(dst, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(folder), str(dst), *extra],
                       check=True, capture_output=True)
        out[name] = str(dst)
    return out


def describe(data: str, probe: int = 64) -> dict:
    """What a local row's decoder gets: bytes of the first `probe` samples, their mean size."""
    import numpy as np

    from dali_pipes.sources.image import ImageFolderSource
    from dali_pipes.sources.shards import ShardSource, is_shard_data
    source = ShardSource(data) if is_shard_data(data) else ImageFolderSource(data)
    reads = [source.read(i) for i in range(min(probe, len(source)))]
    return {"samples": len(source), "mean_bytes": float(np.mean([len(r[0]) for r in reads])),
            "mean_height": float(np.mean([r[1][0] for r in reads])),
            "mean_width": float(np.mean([r[1][1] for r in reads]))}


def run_row(row: str, backend: str, data: str, args, options: dict | None) -> dict:
    """One measuring process (run_one.py, compare.py's child) of one row and backend."""
    one_pass = row in ONE_PASS
    steps = max(1, args.images // args.batch_size) if one_pass else args.steps
    cmd = ["--backend", backend, "--data", data,
           "--batch-size", str(args.batch_size), "--steps", str(steps), "--warmup",
           "0" if one_pass else str(args.warmup), "--device", args.device_name,
           "--workers", str(args.workers), "--size", str(args.size)]
    if options:
        cmd += ["--options", json.dumps(options)]
    result, code, err = run_round(cmd, lambda done: None)  # forked: see bench/launch.py
    if code != 0 or result is None:
        raise compare.BackendFailed(f"{row}/{backend}", code, compare.last_error_line(err))
    result.pop("event")
    return result


def round_order(rnd: int, rows: list[str], backends: list[str]) -> list[tuple[str, str]]:
    """(row, backend) runs of round `rnd`: one backend's rows after the other's, and the
    backends, the steady rows and the one-pass groups (s3-cold always right before
    s3-warm) rotated by the round, so no row always follows the same one."""
    def rotate(items: list, k: int) -> list:
        return items[k % len(items):] + items[:k % len(items)] if items else items

    steady = rotate([r for r in rows if r not in ONE_PASS], rnd)
    groups = [[r] for r in ("folder-pass",) if r in rows] + \
        [[r for r in ("s3-cold", "s3-warm") if r in rows]]
    one_pass = [r for group in rotate([g for g in groups if g], rnd) for r in group]
    return [(row, b) for b in rotate(list(backends), rnd) for row in steady + one_pass]


def throughput(args, data: dict[str, str], s3=None) -> list[dict]:
    """Every row x backend once per round (round_order); medians per row and backend."""
    rows = [r for r in ROWS if s3 is not None or not r.startswith("s3")]
    runs: dict[tuple[str, str], list[dict]] = {(r, b): [] for r in rows for b in args.backends}
    for rnd in range(args.rounds):
        for row, backend in round_order(rnd, rows, args.backends):
            cache = args.work / f"cache-{rnd}-{backend}"
            if row == "s3-cold":
                shutil.rmtree(cache, ignore_errors=True)
            options = {"storage_options": s3["options"], "cache_dir": str(cache)} \
                if row.startswith("s3") else None
            source = s3["url"] if row.startswith("s3") else data[row.replace("-pass", "")]
            print(f"round {rnd + 1}/{args.rounds}: {row} {backend}", file=sys.stderr,
                  flush=True)
            runs[(row, backend)].append(run_row(row, backend, source, args, options))
    table = []
    for (row, backend), results in runs.items():
        med = compare.median_row(results)
        table.append({"row": row, "backend": backend, **{k: med.get(k) for k in (
            "samples_per_s", "samples_per_s_range", "wait_ms_p50", "wait_ms_p95",
            "cpu_ms_per_sample", "peak_rss_mb", "steps", "repeats")},
            "rounds": [r["samples_per_s"] for r in results],
            "cpu_ms_rounds": [r["cpu_ms_per_sample"] for r in results]})
    for entry in table:
        ref = "folder-pass" if entry["row"] in ONE_PASS else "folder"
        base = next(e for e in table if e["row"] == ref and e["backend"] == entry["backend"])
        entry.update(vs_folder_ratios(entry, base))
    return table


def vs_folder_ratios(entry: dict, base: dict) -> dict:
    """A row against its folder row: the ratio of the medians, the ratios round by round
    (rows of one round ran minutes apart at most, so load drifts less between them) and the
    folder's CPU ms per image over the row's (the steadier measure on a shared machine)."""
    import numpy as np
    per_round = [a / b for a, b in zip(entry["rounds"], base["rounds"], strict=True)]
    return {"vs_folder": entry["samples_per_s"] / base["samples_per_s"],
            "vs_folder_rounds": per_round,
            "vs_folder_round_median": float(np.median(per_round)),
            "cpu_vs_folder": base["cpu_ms_per_sample"] / entry["cpu_ms_per_sample"]}


def listing(args, loaders: bool = True) -> dict:
    """Listing time and memory growth of N samples: shards (cached indexes) vs folders; the
    source alone, and with `loaders` make_loader too."""
    from bench.studies.shard_listing_scale import probe, write_folder, write_shards
    n = args.listing_samples
    shards = max(1, n // SHARDS_PER_LISTING)
    shard_dir = args.scale_dir / f"shards-{shards}x{n // shards}"
    write_shards(shard_dir, shards, n // shards)
    out = {"samples": shards * (n // shards)}
    if len(list(shard_dir.glob("*.index.npz"))) < shards:
        out["shards_index_build"] = probe(shard_dir)  # the one-time cold build
    folder = write_folder(args.scale_dir / f"folder-{n}", n)
    for name, data in (("shards", shard_dir), ("folder", folder)):
        for kind in ("source", "loader") if loaders else ("source",):
            out[f"{name}_{kind}"] = probe(data, kind)
    out["dirs"] = {"shards": str(shard_dir), "folder": str(folder)}
    return out


def worker_memory(args, dirs: dict[str, str]) -> dict:
    """bench_worker_rss.py on the folder and the shard listing, each in a fresh process."""
    out = {}
    for name in ("folder", "shards"):
        run = subprocess.run([sys.executable, str(HERE / "bench_worker_rss.py"), dirs[name],
                              "--batches", str(args.worker_batches), "--workers",
                              str(args.workers), "--size", str(args.size)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"bench_worker_rss.py {dirs[name]}: "
                               f"{compare.last_error_line(run.stderr)}")
        out[name] = json.loads(run.stdout.strip().splitlines()[-1])
    return out


def loader_listings(workers: dict) -> dict:
    """The make_loader listing rows (`shards_loader`, `folder_loader`) of worker_memory's
    runs, which time the listing as shard_listing_scale.probe(data, "loader") does."""
    return {f"{name}_loader": {"samples": run["samples"], "seconds": run["listing_seconds"],
                               "rss_mb": run["main_listing_mb"]}
            for name, run in workers.items()}


def _s3_rows(args, data: dict[str, str]):
    """The moto server with the `shards` uploaded, or None (--no-s3)."""
    if args.no_s3:
        return None, None
    from tests.stores.servers import MotoS3
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    server = MotoS3().__enter__()
    url = server.upload(Path(data["shards"]), "bench", "shards")
    return server, {"url": url, "options": server.options}


def main(argv=None) -> int:
    from bench.studies.store_report import print_report, targets
    args = parse_args(argv)
    args.backends = args.backends.split(",")
    args.device_name = compare.resolve_device(args.device)
    args.work.mkdir(parents=True, exist_ok=True)
    data = prepare(args)
    server, s3 = _s3_rows(args, data)
    report: dict = {"settings": {k: str(v) if isinstance(v, Path) else v
                                 for k, v in vars(args).items()}}
    try:
        report["data"] = {name: describe(path) for name, path in data.items()}
        with LoadMonitor() as load:
            report["throughput"] = throughput(args, data, s3)
        report["load"] = load.summary()
        if args.listing_samples:
            report["listing"] = listing(args, loaders=not args.worker_batches)
            if args.worker_batches:
                report["workers"] = worker_memory(args, report["listing"]["dirs"])
                report["listing"].update(loader_listings(report["workers"]))
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    report["env"] = compare.environment(args.device_name)
    report["targets"] = targets(report)
    print_report(report)
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
