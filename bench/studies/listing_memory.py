"""Memory of a folder listing: its file names as a tuple of str against the numpy
PathTable, and (`--tree`) a real tree listed by torchvision's ImageFolder and by ours.

Each layout is built in a fresh process from synthetic ImageNet-like paths
(`<root>/n0xxxxxxx/n0xxxxxxx_<i>.JPEG`, 1000 classes), so the numbers are the layout's own:
resident memory grown while building and keeping it, and the memory a forked child makes
its own (private dirty pages, /proc/self/smaps_rollup) when it reads every name once, as a
DataLoader worker reading its share of the files would. Linux only.

    python bench/studies/listing_memory.py [--n 1000000] [--json PATH]
    python bench/studies/listing_memory.py --tree DIR/data [--before TREE] [--json PATH]

With `--tree`, each of `ImageFolder(DIR/data)`, `ImageFolderSource(DIR/data)` and
`make_loader("image", DIR/data, backend=...)` ("dali", "torch") runs in a fresh process
after its imports (and, with `--before`, also from that checkout of this repository): the
peak resident memory it added (VmHWM, reset before it starts) and what it still holds after.
"""
from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

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


# One listing in a fresh process: argv = [what, data]; one JSON line.
_TREE = r'''
import gc, json, sys
from torchvision.datasets import ImageFolder
from dali_pipes.sources.image import ImageFolderSource
from torch_bridge import make_loader
import torch_bridge.engines.dali, torch_bridge.engines.reference, torch_bridge.modalities.image

def kb(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith(field + ":"))

what, data = sys.argv[1], sys.argv[2]
make = {"ImageFolder": lambda: ImageFolder(data),
        "ImageFolderSource": lambda: ImageFolderSource(data),
        "make_loader, dali": lambda: make_loader("image", data, backend="dali"),
        "make_loader, torch": lambda: make_loader("image", data, backend="torch")}[what]
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS
before = kb("VmRSS")
kept = make()
gc.collect()
print(json.dumps({"peak_mb": (kb("VmHWM") - before) / 1024,
                  "kept_mb": (kb("VmRSS") - before) / 1024}))
'''
TREE_ROWS = ("ImageFolder", "ImageFolderSource", "make_loader, dali", "make_loader, torch")


def tree_rows(data: str, trees: dict[str, str]) -> list[dict]:
    """Peak and kept MB of each listing of `data`, from each source tree, fresh processes."""
    rows = []
    for what in TREE_ROWS:
        for name, tree in trees.items():
            if what == "ImageFolder" and name != next(iter(trees)):
                continue  # torchvision's, the same from every tree
            env = {**os.environ, "PYTHONPATH": tree, "PYTHONWARNINGS": "ignore"}
            out = subprocess.run([sys.executable, "-c", _TREE, what, data], env=env, cwd=tree,
                                 capture_output=True, text=True, timeout=900, check=True)
            rows.append({"what": what, "tree": name, **json.loads(out.stdout.splitlines()[-1])})
    print(f"{'listing':<22}{'tree':<10}{'peak MB':>9}{'kept MB':>9}")
    for r in rows:
        print(f"{r['what']:<22}{r['tree']:<10}{r['peak_mb']:>9.1f}{r['kept_mb']:>9.1f}")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--tree", default=None, help="a folder of class folders to list")
    parser.add_argument("--before", default=None, help="another checkout to measure too")
    args = parser.parse_args(argv)
    if args.tree is not None:
        here = str(Path(__file__).resolve().parents[2])
        trees = {"this tree": here} if args.before is None else \
            {"after": here, "before": os.path.abspath(args.before)}
        found = tree_rows(os.path.abspath(args.tree), trees)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": found, "python": sys.version.split()[0]}, f, indent=1)
        return 0
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
