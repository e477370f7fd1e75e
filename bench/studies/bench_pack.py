"""Pack throughput by engine and store, side by side, and Ray's cost per task.

    python bench/studies/bench_pack.py [--images 640] [--shards 16] [--rounds 3]
                                       [--no-s3] [--tiny-tasks 64] [--json PATH]

1. Throughput. The built-in image set (dali_pipes/sample_data/sample_images.py, 640 JPEGs of
   500x375, 54 MB) packed into `--shards` shards by each engine: `local-1` and `local-2`
   (the local engine with 1 and 2 worker processes, spawned per run) and `ray-1` and `ray-2`
   (one Ray task per shard, at most 1 or 2 at once, on a local Ray of 2 CPUs started once
   on 127.0.0.1 for the whole study), from a local folder into a local folder and from a
   bucket into a bucket (moto's S3 server on 127.0.0.1, in a process of its own). Rounds are
   interleaved (every row once per round, the order rotated each round) so load noise hits
   every row; each row writes into a fresh DST and is timed from `pack()`'s call to its
   return (listing, planning, writing, manifest). Per row, medians over rounds of files/s,
   MB/s (SRC bytes per second) and CPU seconds per GB of SRC: the CPU time of this process
   and every process it started (pool workers, Ray's servers and workers), the moto
   server's left out.
2. Ray's cost per task. (a) An empty Ray task, submitted and waited for one at a time
   (the floor: scheduling and the round trip); (b) the same images packed one per shard
   (`--tiny-tasks` shards) by `ray-1` and by `local-1`, local to local: the difference per
   shard is what a Ray task adds to a shard's work (scheduling, the job's and the record's
   transfer, progress on the driver).
Prints the tables and the machine's load (the study shares its cores with whatever else
runs); --json writes everything, with the settings and the load.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parents[1]))

from bench.metrics import LoadMonitor, tree_seconds  # noqa: E402
from bench.report import write_json  # noqa: E402

ENGINES = {"local-1": ("local", 1), "local-2": ("local", 2), "ray-1": ("ray", 1),
           "ray-2": ("ray", 2)}
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=640, help="built-in images (default 640)")
    p.add_argument("--shards", type=int, default=16, help="shards the images make")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--no-s3", action="store_true", help="leave out the S3 rows")
    p.add_argument("--tiny-tasks", type=int, default=64, help="0: no per-task study")
    p.add_argument("--work", type=Path, default=Path("/tmp/dali_pipes_bench_pack"))
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


class Moto:
    """moto's S3 server in a process of its own (its CPU is not the packer's)."""

    def __enter__(self):
        from tests.stores.servers import free_port
        port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{port}"
        self.options = {"key": "testing", "secret": "testing",
                        "client_kwargs": {"endpoint_url": self.endpoint,
                                          "region_name": "us-east-1"}}
        import boto3
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")
        for _ in range(200):
            try:
                self.client.create_bucket(Bucket="bench")
                break
            except Exception:  # noqa: BLE001 (not listening yet)
                time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()

    def cpu(self) -> float:
        import psutil
        t = psutil.Process(self.proc.pid).cpu_times()
        return t.user + t.system

    def put_tree(self, folder: Path, prefix: str) -> str:
        from tests.stores.servers import put_tree
        return put_tree(self.client, folder, "bench", prefix)


def one_run(row: str, src, dst, shard_size: int, moto: Moto | None) -> dict:
    """Pack `src` into a fresh `dst` with engine `row`; wall s, CPU s, files, bytes."""
    from dali_pipes.pack import PackRun, pack
    engine, workers = ENGINES[row]
    run = PackRun(engine=engine, storage_options=moto.options if moto else None)
    cpu0, moto0, t0 = tree_seconds(), moto.cpu() if moto else 0.0, time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # the per-shard lines
        manifest = pack(src, dst, shard_size=shard_size, workers=workers, progress=False,
                        run=run)
    wall = time.perf_counter() - t0
    cpu = tree_seconds() - cpu0 - ((moto.cpu() - moto0) if moto else 0.0)
    nbytes = sum(s["bytes"] for s in manifest["shards"])
    return {"wall_s": wall, "cpu_s": cpu, "files": manifest["samples"], "tar_bytes": nbytes}


def throughput(args, folder: Path, src_bytes: int, moto: Moto | None) -> list[dict]:
    paths = ["local->local"] + ([] if moto is None else ["s3->s3"])
    src = {"local->local": str(folder)}
    if moto is not None:
        src["s3->s3"] = moto.put_tree(folder, "src")
    shard_size = max(1 << 10, src_bytes // args.shards + 1)
    rows = [(p, e) for p in paths for e in ENGINES]
    runs: dict[tuple[str, str], list[dict]] = {r: [] for r in rows}
    for rnd in range(args.rounds):
        order = rows[rnd % len(rows):] + rows[:rnd % len(rows)]
        for path, engine in order:
            name = f"{path.replace('->', '-')}-{engine}-{rnd}"
            dst = f"s3://bench/out/{name}" if path == "s3->s3" else str(args.work / name)
            print(f"round {rnd + 1}/{args.rounds}: {path} {engine}", file=sys.stderr,
                  flush=True)
            runs[(path, engine)].append(one_run(engine, src[path], dst, shard_size,
                                                moto if path == "s3->s3" else None))
    table = []
    for (path, engine), results in runs.items():
        walls = [r["wall_s"] for r in results]
        cpus = [r["cpu_s"] for r in results]
        table.append({"path": path, "engine": engine,
                      "files_per_s": results[0]["files"] / statistics.median(walls),
                      "mb_per_s": src_bytes / 1e6 / statistics.median(walls),
                      "cpu_s_per_gb": statistics.median(cpus) / (src_bytes / 1e9),
                      "wall_s_rounds": walls, "cpu_s_rounds": cpus})
    return table


def per_task(args, folder: Path) -> dict:
    """An empty task's round trip; the same images one per shard on ray-1 and local-1."""
    import ray

    @ray.remote(num_cpus=1)
    def nothing() -> None:
        return None
    ray.get(nothing.remote())  # a worker started
    trips = []
    for _ in range(50):
        t0 = time.perf_counter()
        ray.get(nothing.remote())
        trips.append(time.perf_counter() - t0)
    from dali_pipes.pack import PackRun, pack
    from dali_pipes.sources.image import ImageFolderSource
    sizes = ImageFolderSource(folder).listing.sizes[:args.tiny_tasks]
    small = args.work / "tiny-src"
    shutil.rmtree(small, ignore_errors=True)
    for path in ImageFolderSource(folder).files[:args.tiny_tasks]:
        target = small / Path(path).parent.name / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    out = {"empty_task_ms_median": 1e3 * statistics.median(trips)}
    for engine in ("local", "ray"):
        walls = []
        for rnd in range(args.rounds):
            t0 = time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):
                pack(small, args.work / f"tiny-{engine}-{rnd}", shard_size=int(sizes.min()),
                     workers=1, progress=False, run=PackRun(engine=engine))
            walls.append(time.perf_counter() - t0)
        out[f"{engine}_1_per_shard_ms"] = 1e3 * statistics.median(walls) / len(sizes)
    out["ray_task_overhead_ms"] = out["ray_1_per_shard_ms"] - out["local_1_per_shard_ms"]
    out["shards"] = len(sizes)
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.update(RAY_ENV)  # before Ray is imported: a one-machine Ray on loopback only
    # Ray's workers import this tree's packages too
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1]),
                                                os.environ.get("PYTHONPATH", "")])
    import ray

    from dali_pipes.sample_data.sample_images import image_dataset
    folder = image_dataset(n_images=args.images)
    src_bytes = sum(p.stat().st_size for p in folder.rglob("*.jpg"))
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             _node_ip_address="127.0.0.1", logging_level="ERROR", log_to_driver=False,
             _temp_dir=str(args.work / "ray"))
    try:
        with LoadMonitor() as load:
            if args.no_s3:
                table = throughput(args, folder, src_bytes, None)
            else:
                with Moto() as moto:
                    table = throughput(args, folder, src_bytes, moto)
            tasks = per_task(args, folder) if args.tiny_tasks else None
    finally:
        ray.shutdown()
    print(f"{args.images} images, {src_bytes / 1e6:.1f} MB, {args.shards} shards, "
          f"{args.rounds} rounds; load: {load.summary()}")
    print(f"{'path':13} {'engine':8} {'files/s':>9} {'MB/s':>7} {'CPU-s/GB':>9}")
    for r in table:
        print(f"{r['path']:13} {r['engine']:8} {r['files_per_s']:9.0f} {r['mb_per_s']:7.1f} "
              f"{r['cpu_s_per_gb']:9.1f}")
    if tasks:
        print("per task:", {k: round(v, 2) for k, v in tasks.items()})
    if args.json:
        write_json(args.json, {"settings": vars(args) | {"work": str(args.work),
                                                          "json": str(args.json)},
                               "src_bytes": src_bytes, "throughput": table,
                               "per_task": tasks, "load": load.summary(),
                               "ray": ray.__version__})


if __name__ == "__main__":
    main()
