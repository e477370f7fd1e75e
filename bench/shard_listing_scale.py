"""Listing cost at scale: ShardSource over N shards of K tiny samples (1M by default).

    python bench/shard_listing_scale.py [--shards 100] [--per-shard 10000] [--dir PATH]

Writes the shards once (a 16x16 JPEG + .cls per sample, with Python's tarfile), then in fresh
processes times the listing with the shard indexes built from the tars (cold) and read from
their cached `.index.npz` files (warm), and reports the listing's resident memory.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

_PROBE = """
import json, sys, time
def rss():
    line = next(l for l in open('/proc/self/status') if l.startswith('VmRSS'))
    return int(line.split()[1]) / 1024
import numpy as np
from dali_pipes.sources.shards import ShardSource
before = rss()
t = time.perf_counter()
source = ShardSource(sys.argv[1])
print(json.dumps({"samples": len(source), "seconds": time.perf_counter() - t,
                  "rss_mb": rss() - before}))
"""


def _write(folder: Path, shards: int, per_shard: int) -> None:
    import numpy as np

    from bench.sample_data import encode_jpeg, photo_like
    jpeg = encode_jpeg(photo_like(np.random.default_rng(0), 16, 16))
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        path = folder / f"shard-{s:06d}.tar"
        if path.exists():
            continue
        with tarfile.open(f"{path}.tmp", "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(per_shard):
                for ext, data in (("jpg", jpeg), ("cls", str(i % 1000).encode())):
                    info = tarfile.TarInfo(f"{s * per_shard + i:09d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        Path(f"{path}.tmp").rename(path)


def _probe(folder: Path) -> dict:
    run = subprocess.run([sys.executable, "-c", _PROBE, str(folder)], capture_output=True,
                         text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--per-shard", type=int, default=10_000)
    parser.add_argument("--dir", default="/tmp/dali_pipes_listing_scale")
    args = parser.parse_args()
    folder = Path(args.dir)
    _write(folder, args.shards, args.per_shard)
    for index in folder.glob("*.index.npz"):
        index.unlink()
    print("cold (indexes built):", _probe(folder))
    print("warm (indexes cached):", _probe(folder))


if __name__ == "__main__":
    main()
