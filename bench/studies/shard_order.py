"""What order="shards" gains in read locality and gives up in shuffle quality, against the
global order, on a synthetic listing (no files: the plan's orders only).

    python bench/studies/shard_order.py [--shards 1000] [--per-shard 1000] [--world 8]
                                [--windows 1,2,4,8,16] [--member-kib 100] [--cache-mib 1024]
                                [--batch 64] [--real-shards 128] [--real-per-shard 24]
                                [--real-member-kib 64] [--real-cache-mib 8] [--no-real]
                                [--json PATH]

Per order, for rank 0 of `--world` ranks over one epoch (epoch 0, seed 0) of the plan
(torch_bridge.order.plan.EpochPlan with the make_loader samplers):
- `shards_per_1k`: distinct shards among each 1000 consecutive samples the rank reads (mean);
- `seeks_per_1k`: reads that are not of the member right after the previous read's (mean);
- `ranks_per_shard`: how many ranks read each shard in the epoch (mean over shards);
- `fetched_per_used`: bytes a per-rank LRU cache of 1 MiB blocks (`--cache-mib`, as
  dali_pipes/stores/block_cache.py) fetches per byte the rank uses, with members of
  `--member-kib` behind a 512-byte tar header and followed by a 1 KiB label member;
- `classes_sorted` / `classes_shuffled`: distinct classes per batch of `--batch` (mean) when
  the shards hold `--shards` classes stored in order (one class per shard, as the pack tool
  writes class folders: then also the distinct shards per batch) or in random order
  (shuffled before packing);
- `spearman`: the rank correlation of epoch position and index over the whole epoch.

Then the same for real code (skip with `--no-real`): `--real-shards` tar shards of
`--real-per-shard` members of `--real-member-kib` (random bytes named .jpg, with a .cls) in
fsspec's in-memory file system, listed by ShardSource (`memory://` URLs, so the remote path:
FsspecStore, tar indexes, the block cache of `--real-cache-mib` under a temporary folder);
rank 0 of `--world` reads its epoch with `source.read(i, STORED)` (the stored bytes) and the
block cache's own miss counter gives the blocks fetched (blocks of 1 MiB, no read-ahead:
the store's defaults fetch 4 MiB blocks, and more after a miss).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from torch_bridge.order.plan import EpochPlan  # noqa: E402
from torch_bridge.order.shard_order import ShardWindows  # noqa: E402

BLOCK = 1 << 20
HEADER, LABEL_MEMBER = 512, 1024


def rank_orders(shard_ids: np.ndarray, world: int, window: int | None
                ) -> tuple[np.ndarray, list[np.ndarray]]:
    """(epoch 0's order, each rank's indices of it); window None: the global order."""
    sampler = None if window is None else ShardWindows(shard_ids, window)
    plans = [EpochPlan(len(shard_ids), 64, rank=r, world_size=world, sampler=sampler)
             for r in range(world)]
    order = plans[0].order(0)
    out = [order[r::world] for r in range(world)]
    np.testing.assert_array_equal(out[0], plans[0].rank_indices(0))  # the plan's own share
    return order, out


def per_chunk(values: np.ndarray, size: int, func) -> float:
    """The mean of `func` over consecutive chunks of `size` entries (whole chunks only)."""
    chunks = values[:len(values) // size * size].reshape(-1, size)
    return float(np.mean([func(c) for c in chunks]))


def seeks(indices: np.ndarray, per_shard: int) -> float:
    """Reads per 1000 that are not of the member after the previous read's."""
    nxt = indices[1:] == indices[:-1] + 1
    same = indices[1:] // per_shard == indices[:-1] // per_shard
    return 1000 * float(np.mean(~(nxt & same)))


def fetched_per_used(indices: np.ndarray, per_shard: int, member: int, cache: int) -> float:
    """Bytes an LRU block cache of `cache` bytes fetches per byte read."""
    stride = HEADER + member + LABEL_MEMBER  # one sample's bytes in its shard
    lru: OrderedDict[tuple[int, int], None] = OrderedDict()
    capacity, misses = max(1, cache // BLOCK), 0
    for index in indices.tolist():
        shard, start = divmod(index, per_shard)
        first = start * stride
        for block in range(first // BLOCK, (first + HEADER + member - 1) // BLOCK + 1):
            key = (shard, block)
            if key in lru:
                lru.move_to_end(key)
                continue
            misses += 1
            lru[key] = None
            if len(lru) > capacity:
                lru.popitem(last=False)
    return misses * BLOCK / (len(indices) * (HEADER + member))


def spearman(order: np.ndarray) -> float:
    """Rank correlation of position in the epoch and index (order is a permutation)."""
    return float(np.corrcoef(np.arange(len(order)), order)[0, 1])


def measure(args, window: int | None) -> dict:
    shard_ids = np.repeat(np.arange(args.shards), args.per_shard)
    order, ranks = rank_orders(shard_ids, args.world, window)
    mine, shards_of = ranks[0], lambda c: len(np.unique(c // args.per_shard))
    shuffled_classes = np.random.default_rng(1).permutation(shard_ids)
    readers = np.zeros(args.shards, np.int64)
    for r in ranks:
        readers[np.unique(r // args.per_shard)] += 1
    return {"order": "global" if window is None else f"shards, window {window}",
            "shards_per_1k": per_chunk(mine, 1000, shards_of),
            "seeks_per_1k": seeks(mine, args.per_shard),
            "ranks_per_shard": float(readers.mean()),
            "fetched_per_used": fetched_per_used(mine, args.per_shard, args.member_kib << 10,
                                                 args.cache_mib << 20),
            "classes_sorted": per_chunk(mine, args.batch, shards_of),
            "classes_shuffled": per_chunk(mine, args.batch,
                                          lambda c: len(np.unique(shuffled_classes[c]))),
            "spearman": spearman(order)}


def _write_memory_shards(root: str, shards: int, per_shard: int, member: int) -> None:
    """Tar shards `<root>/shard-000000.tar`, ... in fsspec's memory file system."""
    import io
    import tarfile

    import fsspec
    fs, rng = fsspec.filesystem("memory"), np.random.default_rng(0)
    for s in range(shards):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for j in range(per_shard):
                for ext, data in (("jpg", rng.bytes(member)), ("cls", str(s).encode())):
                    info = tarfile.TarInfo(f"s{s:04d}_{j:05d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        fs.pipe(f"{root}/shard-{s:06d}.tar", buf.getvalue())


def real_fetches(args, window: int | None, index_dir: str) -> dict:
    """Blocks rank 0's epoch fetches through ShardSource's real remote path (a fresh block
    cache), against the distinct blocks its reads touch."""
    import tempfile

    from dali_pipes.sources.protocol import STORED
    from dali_pipes.sources.shards import ShardSource
    from dali_pipes.stores.remote import FsspecStore
    root = f"memory://shard_order_bench/{args.real_shards}x{args.real_per_shard}"
    with tempfile.TemporaryDirectory() as cache:
        source = ShardSource(root + "/", index_dir=index_dir, store=FsspecStore(
            cache_dir=cache, cache_limit=args.real_cache_mib << 20, block_size=BLOCK,
            read_ahead=0))  # blocks of the simulation's size, each miss one fetch
        _, ranks = rank_orders(np.asarray(source.shard_ids), args.world, window)
        for i in ranks[0]:
            source.read(int(i), STORED)
        fetched = source.store.cache.misses
    first = (source.offsets[ranks[0]] - HEADER) // BLOCK
    last = (source.offsets[ranks[0]] + source.sizes[ranks[0]] - 1) // BLOCK
    touched = {(int(s), b) for s, f, t in zip(source.shard_ids[ranks[0]], first, last,
                                              strict=True) for b in range(f, t + 1)}
    return {"order": "global" if window is None else f"shards, window {window}",
            "samples": len(ranks[0]), "shards_read": len(np.unique(source.shard_ids[ranks[0]])),
            "blocks_touched": len(touched), "blocks_fetched": fetched,
            "fetches_per_block": fetched / len(touched)}


def _real_rows(args, windows: list[int | None]) -> list[dict]:
    import tempfile

    import fsspec
    root = f"memory://shard_order_bench/{args.real_shards}x{args.real_per_shard}"
    _write_memory_shards(root, args.real_shards, args.real_per_shard,
                         args.real_member_kib << 10)
    try:
        with tempfile.TemporaryDirectory() as index_dir:  # indexes once, a fresh cache a row
            return [real_fetches(args, w, index_dir) for w in windows]
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(v if isinstance(v, str) else f"{v:.4g}" for v in r.values())
              + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", type=int, default=1000)
    p.add_argument("--per-shard", type=int, default=1000)
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--windows", default="1,2,4,8,16")
    p.add_argument("--member-kib", type=int, default=100)
    p.add_argument("--cache-mib", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--real-shards", type=int, default=128)
    p.add_argument("--real-per-shard", type=int, default=24)
    p.add_argument("--real-member-kib", type=int, default=64)
    p.add_argument("--real-cache-mib", type=int, default=8)
    p.add_argument("--no-real", action="store_true", help="skip the real-code measurement")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    windows = [None, *map(int, args.windows.split(","))]
    rows = [measure(args, w) for w in windows]
    print(_table(rows))
    real = [] if args.no_real else _real_rows(args, windows)
    if real:
        print("\n" + _table(real))
    if args.json:
        args.json.write_text(json.dumps({"options": {k: str(v) for k, v in
                                                     vars(args).items()},
                                         "rows": rows, "real": real}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
