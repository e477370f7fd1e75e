"""Memory of a folder listing's file names: a tuple of str against the numpy PathTable.

Each layout is built in a fresh process from synthetic ImageNet-like paths
(`<root>/n0xxxxxxx/n0xxxxxxx_<i>.JPEG`, 1000 classes), so the numbers are the layout's own:
resident memory grown while building and keeping it, and the memory a forked child makes
its own (private dirty pages, /proc/self/smaps_rollup) when it reads every name once, as a
DataLoader worker reading its share of the files would. Linux only.

    python bench/studies/listing_memory.py [--n 1000000] [--json PATH]
"""
from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import sys

ROOT = "/datasets/imagenet/train"
LAYOUTS = ("tuple", "fixed_width", "buffer_offsets", "path_table")


def synthetic_paths(n: int):
    for i in range(n):
        wnid = f"n{1440764 + (i % 1000) * 9973:08d}"
        yield f"{ROOT}/{wnid}/{wnid}_{i:07d}.JPEG"


def _kb(field: str, path: str = "/proc/self/smaps_rollup") -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def build(layout: str, n: int):
    import numpy as np

    from dali_pipes.sources.names import PathTable
    if layout == "tuple":
        return tuple(synthetic_paths(n))
    if layout == "path_table":
        return PathTable.from_paths(synthetic_paths(n))
    raw = [os.fsencode(p) for p in synthetic_paths(n)]
    if layout == "fixed_width":
        out = np.array(raw, dtype=f"S{max(map(len, raw))}")
    else:  # one byte buffer of whole paths + int64 ends
        out = (np.frombuffer(b"".join(raw), np.uint8).copy(),
               np.cumsum(np.fromiter(map(len, raw), np.int64, len(raw))))
    del raw
    return out


def _read_all(layout: str, names) -> int:
    """Every name once by index, as workers reading their samples do."""
    if layout != "buffer_offsets":
        return sum(len(names[i]) for i in range(len(names)))
    blob, ends = names
    return sum(len(blob[(ends[i - 1] if i else 0):ends[i]].tobytes()) for i in range(len(ends)))


def _held(layout: str, names) -> int:
    """Bytes the layout's objects hold (for the tuple: the str objects and the tuple)."""
    if layout == "tuple":
        return sys.getsizeof(names) + sum(map(sys.getsizeof, names))
    if layout == "path_table":
        return names.nbytes
    if layout == "fixed_width":
        return names.nbytes
    return sum(a.nbytes for a in names)


def _child(layout: str, names, queue) -> None:
    before = _kb("Private_Dirty")
    _read_all(layout, names)
    queue.put(_kb("Private_Dirty") - before)


def measure(layout: str, n: int, queue) -> None:
    import numpy  # noqa: F401  (imported before the first reading: not counted)

    import dali_pipes.sources.names  # noqa: F401
    gc.collect()
    rss0 = _kb("VmRSS", "/proc/self/status")
    names = build(layout, n)
    gc.collect()
    rss1 = _kb("VmRSS", "/proc/self/status")
    inner = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=_child, args=(layout, names, inner))
    child.start()
    copied = inner.get(timeout=600)
    child.join()
    queue.put({"layout": layout, "n": n, "rss_mb": (rss1 - rss0) / 1024,
               "held_mb": _held(layout, names) / 2**20,
               "fork_copied_mb": copied / 1024})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for layout in LAYOUTS:  # each in a fresh (spawned) process
        queue = mp.get_context("spawn").Queue()
        proc = mp.get_context("spawn").Process(target=measure, args=(layout, args.n, queue))
        proc.start()
        rows.append(queue.get(timeout=900))
        proc.join()
    print(f"{'layout':<16}{'names':>10}{'held MB':>9}{'RSS MB':>9}"
          f"{'copied by a forked reader MB':>31}")
    for r in rows:
        print(f"{r['layout']:<16}{r['n']:>10}{r['held_mb']:>9.1f}{r['rss_mb']:>9.1f}"
              f"{r['fork_copied_mb']:>31.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "python": sys.version.split()[0]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
