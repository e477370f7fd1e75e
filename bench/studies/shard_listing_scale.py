"""Listing cost at scale: N samples as WebDataset shards against N files in class folders.

    python bench/studies/shard_listing_scale.py [--shards 100] [--per-shard 10000] [--dir PATH]
                                        [--folder] [--no-cold]

Writes the shards once (a 16x16 JPEG + .cls per sample, with Python's tarfile), then in fresh
processes times the listing with the shard indexes built from the tars (cold) and read from
their cached `.index.npz` files (warm), and reports the listing's resident memory. With
`--folder` it also writes (once) the same number of tiny JPEG files into class folders of
1,000 files and times their listing. `bench/studies/store_table.py` calls these functions.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# Run in a fresh process: argv = [kind ("source" or "loader"), data]. Prints one JSON line.
_PROBE = """
import json, sys, time
def rss():
    line = next(l for l in open('/proc/self/status') if l.startswith('VmRSS'))
    return int(line.split()[1]) / 1024
import numpy as np
import torch_bridge
from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.sources.shards import ShardSource, is_shard_data
kind, data = sys.argv[1], sys.argv[2]
if kind == "loader":  # imports are not the listing's cost
    import torch, torchvision.transforms.v2, torch_bridge.factory, torch_bridge.engines.reference
before = rss()
t = time.perf_counter()
if kind == "loader":
    obj = torch_bridge.make_loader("image", data, backend="torch", batch_size=64)
else:
    obj = (ShardSource if is_shard_data(data) else ImageFolderSource)(data)
print(json.dumps({"samples": len(obj._source("path") if kind == "loader" else obj),
                  "seconds": time.perf_counter() - t, "rss_mb": rss() - before}))
"""


def tiny_jpeg() -> bytes:
    """The 16x16 JPEG every sample of these trees holds."""
    import numpy as np

    from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
    return encode_jpeg(photo_like(np.random.default_rng(0), 16, 16))


def write_shards(folder: Path, shards: int, per_shard: int) -> None:
    """`shards` tar shards of `per_shard` samples each in `folder` (missing ones only)."""
    jpeg = tiny_jpeg()
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


def write_folder(folder: Path, samples: int, per_class: int = 1000) -> Path:
    """(Once) `samples` tiny JPEG files in class folders of `per_class` under `folder`;
    prints a progress line on stderr every 50,000 files. Returns the data folder."""
    marker = folder / f".complete-{samples}x{per_class}"
    if marker.exists():
        return folder
    jpeg, start = tiny_jpeg(), time.perf_counter()
    for i in range(samples):
        if i % per_class == 0:
            os.makedirs(folder / f"class_{i // per_class:05d}", exist_ok=True)
        with open(folder / f"class_{i // per_class:05d}" / f"img_{i:09d}.jpg", "wb") as f:
            f.write(jpeg)
        if (i + 1) % 50_000 == 0 or i + 1 == samples:
            print(f"writing the folder tree: {i + 1:,} of {samples:,} files "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    marker.write_text("ok\n")
    return folder


def probe(data: Path, kind: str = "source") -> dict:
    """Listing time and resident memory growth in a fresh process: `kind` "source" (the
    ShardSource / ImageFolderSource) or "loader" (make_loader, torch backend)."""
    run = subprocess.run([sys.executable, "-c", _PROBE, kind, str(data)], capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise RuntimeError(f"listing probe of {data} failed: {run.stderr.strip()[-500:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--per-shard", type=int, default=10_000)
    parser.add_argument("--dir", default="/tmp/dali_pipes_listing_scale")
    parser.add_argument("--folder", action="store_true",
                        help="also list as many files in class folders")
    parser.add_argument("--no-cold", action="store_true", help="keep cached shard indexes")
    args = parser.parse_args()
    folder = Path(args.dir)
    write_shards(folder, args.shards, args.per_shard)
    if not args.no_cold:
        for index in folder.glob("*.index.npz"):
            index.unlink()
        print("cold (indexes built):", probe(folder))
    print("warm (indexes cached):", probe(folder))
    if args.folder:
        tree = write_folder(Path(f"{args.dir}-folder"), args.shards * args.per_shard)
        print("class folders:", probe(tree))


if __name__ == "__main__":
    main()
