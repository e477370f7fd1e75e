"""What one sample's read costs the feed, per store: CPU time of `read` (the stored bytes,
`STORED`) and of the checked `read`.

    python bench/studies/bench_store_reads.py [--images 640] [--rounds 7] [--no-s3]

The built-in image set as class folders, as local shards (`python -m dali_pipes.pack`) and
as those shards on S3 (moto's server on 127.0.0.1) behind a warm block cache. Each round
reads every sample once per store in one shuffled order, stores interleaved; the thread's
CPU time per sample (steadier than wall time on a shared machine), medians over rounds.
`read` is the store's bytes (the shard reads include the tar header check);
The checked `read` adds the image header and JPEG scan checks that both backends run.
"""
from __future__ import annotations

import argparse
import functools
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def cpu_us_per_sample(read, order) -> float:
    """Thread CPU microseconds per call of `read(i)` over `order`."""
    start = time.thread_time()
    for i in order:
        read(int(i))
    return (time.thread_time() - start) / len(order) * 1e6


def main(argv=None) -> int:
    import numpy as np

    from dali_pipes.sample_data.sample_images import image_dataset
    from dali_pipes.sources.image import ImageFolderSource
    from dali_pipes.sources.protocol import STORED
    from dali_pipes.sources.shards import ShardSource
    from dali_pipes.stores.remote import FsspecStore
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=640)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--no-s3", action="store_true")
    args = p.parse_args(argv)
    folder = image_dataset(n_images=args.images)
    work = Path(tempfile.mkdtemp(prefix="store_reads-"))
    subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(folder), str(work / "shards")],
                   check=True, capture_output=True)
    sources = {"folder": ImageFolderSource(folder), "shards": ShardSource(str(work / "shards"))}
    server = None
    if not args.no_s3:
        from tests.stores.servers import MotoS3
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = MotoS3().__enter__()
        url = server.upload(work / "shards", "bench", "shards")
        s3 = ShardSource(url, store=FsspecStore(storage_options=server.options,
                                                cache_dir=str(work / "cache")))
        for i in range(len(s3)):  # warm the cache
            s3.read(i, STORED)
        sources["s3-warm"] = s3
    try:
        order = np.random.default_rng(0).permutation(len(sources["folder"]))
        times: dict[str, list[float]] = {f"{k} {m}": [] for k in sources
                                         for m in ("read", "read checked")}
        for _ in range(args.rounds):
            for name, source in sources.items():
                stored = functools.partial(source.read, request=STORED)
                times[f"{name} read"].append(cpu_us_per_sample(stored, order))
                times[f"{name} read checked"].append(cpu_us_per_sample(source.read, order))
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    for key, values in times.items():
        print(f"{key:<22} {np.median(values):7.1f} us CPU per sample "
              f"(min {min(values):.1f}, max {max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
