"""A model on paper: a pack of 10M files on 1 to 64 nodes, and 64 training ranks reading the
shards from S3. Pure arithmetic over the inputs below (S3's documented limits, the shape of
the data, this repository's code paths) and two figures measured here (`--cpu-s-per-gb`, the
pack's CPU per GB from S3 to S3, and `--task-ms`, Ray's cost per task on the driver; both
from bench/studies/bench_pack.py). Prints the tables of docs/scaling.md.

    python bench/studies/scaling_model.py [--cpu-s-per-gb 57] [--task-ms 31]
                                          [--latency-s 0.15] [--rank-rate 2000]
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Inputs:
    files: int = 10_000_000
    file_bytes: float = 110e3  # ImageNet-1k's mean JPEG
    shard_bytes: float = 256 * 2**20  # the pack tool's default
    cores: int = 16  # per node: Ray tasks at once (1 CPU each)
    nic: float = 25e9 / 8  # bytes/s per node
    latency_s: float = 0.15  # S3's first byte for small objects: 100-200 ms
    conn_bw: float = 87.5e6  # bytes/s per connection: AWS's 85-90 MB/s
    get_per_prefix: float = 5_500  # GET/HEAD per second per partitioned prefix
    put_per_prefix: float = 3_500  # PUT/COPY/POST/DELETE per second per prefix
    read_ahead: int = 8  # concurrent GETs per pack task (dali_pipes.pack._shard)
    part_bytes: float = 50 * 2**20  # s3fs's multipart part size
    list_page: int = 1000  # keys per LIST answer (pages read one after the other)
    driver_bytes_per_file: float = 1.2e3  # measured here: listing, sources, jobs
    cpu_s_per_gb: float = 57.0  # measured here (S3 to S3, moto's CPU left out)
    task_ms: float = 31.0  # measured here: what a Ray task adds to a shard, one at a time


def pack_task(p: Inputs) -> dict:
    """One shard's task: its files, read / CPU / upload seconds and its duration."""
    files = p.shard_bytes / p.file_bytes
    read = files * (p.latency_s + p.file_bytes / p.conn_bw) / p.read_ahead
    cpu = p.cpu_s_per_gb * p.shard_bytes / 1e9
    parts = -(-p.shard_bytes // p.part_bytes)
    upload = p.shard_bytes / p.conn_bw + parts * p.latency_s  # parts one after the other
    return {"files": files, "read_s": read, "cpu_s": cpu, "upload_s": upload,
            "task_s": max(read, cpu) + upload}


def pack_rows(p: Inputs, nodes: list[int], partitions: int) -> list[dict]:
    """Per cluster size: files/s, GET/s wanted, the time, and what bounds it first."""
    task = pack_task(p)
    listing = p.files / p.list_page * p.latency_s
    shards = p.files / task["files"]
    rows = []
    for n in nodes:
        wanted = n * p.cores * task["files"] / task["task_s"]  # files/s = GET/s
        nic = n * p.nic / (2 * p.file_bytes)  # in and out through each NIC
        cap = p.get_per_prefix * partitions
        rate = min(wanted, cap, nic)
        bound = "S3 GET/s per prefix" if rate == cap else "NIC" if rate == nic else \
            ("CPU" if task["cpu_s"] > task["read_s"] else "GET latency per task")
        waves = shards / (n * p.cores)
        pack_s = max(p.files / rate, task["task_s"] * max(1.0, waves))
        if listing > pack_s:
            bound += "; the driver's listing takes longer"
        rows.append({"nodes": n, "tasks": n * p.cores, "files_per_s": rate,
                     "get_per_s_wanted": wanted,
                     "put_per_s": shards * (parts_of(p) + 3) / pack_s,
                     "list_s": listing, "pack_s": pack_s, "total_s": listing + pack_s,
                     "bound": bound,
                     "driver_busy": n * p.cores / task["task_s"] * p.task_ms / 1e3})
    return rows


def parts_of(p: Inputs) -> float:
    return -(-p.shard_bytes // p.part_bytes) + 1  # parts + the completing request


def train_rows(p: Inputs, ranks: int, rank_rate: float) -> list[dict]:
    """Per read path: requests per sample, the GET/s 64 ranks want at `rank_rate`, the
    rate per rank the prefix allows, and the readers per rank that latency asks for."""
    block = 2**20
    paths = [("order='global', no cache", 1.0, p.file_bytes),
             ("order='shards', 1 MiB blocks cached", p.file_bytes / block, block),
             ("order='shards', 8 MiB blocks", p.file_bytes / (8 * block), 8 * block)]
    rows = []
    for name, gets_per_sample, request_bytes in paths:
        per_get_s = p.latency_s + request_bytes / p.conn_bw
        rows.append({"path": name, "gets_per_sample": gets_per_sample,
                     "get_per_s_wanted": ranks * rank_rate * gets_per_sample,
                     "rank_rate_allowed": p.get_per_prefix / (ranks * gets_per_sample),
                     "readers_per_rank": rank_rate * gets_per_sample * per_get_s})
    return rows


def index_walk(p: Inputs) -> dict:
    """The first listing of remote shards: each shard's tar headers walked, one shard after
    the other (about one 64 KiB GET per sample without a cache, the whole shard in 1 MiB
    blocks with one)."""
    shards = p.files * p.file_bytes / p.shard_bytes
    per_shard_blocks = p.shard_bytes / 2**20 * (p.latency_s + 2**20 / p.conn_bw)
    per_shard_nocache = p.shard_bytes / p.file_bytes * (p.latency_s + 65536 / p.conn_bw)
    return {"shards": shards, "hours_cached": shards * per_shard_blocks / 3600,
            "hours_uncached": shards * per_shard_nocache / 3600,
            "with_saved_indexes_s": shards * p.latency_s / 64}  # 64 GETs at once


def main(argv=None) -> None:
    a = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--cpu-s-per-gb", type=float, default=Inputs.cpu_s_per_gb)
    a.add_argument("--task-ms", type=float, default=Inputs.task_ms)
    a.add_argument("--latency-s", type=float, default=Inputs.latency_s)
    a.add_argument("--rank-rate", type=float, default=2000.0, help="samples/s per rank")
    args = a.parse_args(argv)
    p = Inputs(cpu_s_per_gb=args.cpu_s_per_gb, task_ms=args.task_ms,
               latency_s=args.latency_s)
    task = pack_task(p)
    print("one task:", {k: round(v, 1) for k, v in task.items()})
    for partitions in (1, 1000):
        print(f"\npack of {p.files:,} files, S3 prefix partitions: {partitions}")
        print("| nodes | tasks | files/s | GET/s wanted | PUT/s | list (s) | pack (s) | "
              "total | first bound | driver busy with tasks |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in pack_rows(p, [1, 2, 4, 8, 16, 32, 64], partitions):
            print(f"| {r['nodes']} | {r['tasks']} | {r['files_per_s']:,.0f} | "
                  f"{r['get_per_s_wanted']:,.0f} | {r['put_per_s']:,.0f} | {r['list_s']:,.0f} | "
                  f"{r['pack_s']:,.0f} | {_hms(r['total_s'])} | {r['bound']} | "
                  f"{100 * r['driver_busy']:.0f}% |")
    print(f"\n64 ranks at {args.rank_rate:,.0f} samples/s each")
    print("| read path | GETs per sample | GET/s wanted | samples/s per rank the prefix "
          "allows | concurrent reads per rank |")
    print("|---|---|---|---|---|")
    for r in train_rows(p, 64, args.rank_rate):
        print(f"| {r['path']} | {r['gets_per_sample']:.3f} | {r['get_per_s_wanted']:,.0f} | "
              f"{r['rank_rate_allowed']:,.0f} | {r['readers_per_rank']:.1f} |")
    walk = index_walk(p)
    print("\nfirst listing of the shards per node:", {k: round(v, 1) for k, v in walk.items()},
          f"driver memory for the pack: {p.files * p.driver_bytes_per_file / 1e9:.0f} GB")


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


if __name__ == "__main__":
    main()
