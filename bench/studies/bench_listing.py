"""Listing time of an image tree: torchvision's ImageFolder against ours (the listing, the
first-use stat pass, the eager listing, the whole `make_loader` call and its first batch on
both backends), side by side, optionally against another source tree (before a change).

    python bench/studies/bench_listing.py DIR [--classes 100] [--per-class 1000]
                                          [--rounds 3] [--before TREE] [--fresh 0]

Makes (once) DIR/data/class_k/img_i.jpg as hard links to a few small JPEGs (one per 50,000
files: a file system allows about 65,000 links per inode). Each source tree (this one, and
`--before TREE`, a checkout of this repository) gets one long-lived process that imports
everything and runs one untimed round first; then the rounds are interleaved (a round of
one tree, a round of the other). A round times, in turn: `ImageFolder(DIR/data)`,
`ImageFolderSource(DIR/data)` (`file_stats="lazy"`), its first `listing_digest()` (the stat
pass a loader's first state save or load runs), `ImageFolderSource(..., file_stats=
"listing")`, `make_loader("image", DIR/data, backend=...)` for "dali" and "torch", and for
each loader the wait for its first batch and the close that ends that pass (the pass's
statistics count the bytes read: a lazy listing takes its file sizes then). Each row gets the
median and best wall seconds and the median CPU seconds of the process (all its threads;
the torch backend's worker processes are not counted). `--fresh N` adds N fresh processes
per tree and backend (and for ImageFolder), interleaved: the import, `make_loader`, the
first batch and the close as a script starting cold sees them. Put DIR on a tmpfs
(/dev/shm) for the directory cost alone.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_PER_SEED = 50_000
_HERE = str(Path(__file__).resolve().parents[2])

# One tree's process: a round per line read from stdin, one JSON line of timings per round.
_WORKER = r'''
import json, sys, time
from torchvision.datasets import ImageFolder
from dali_pipes.sources.image import ImageFolderSource
from torch_bridge import make_loader
data = sys.argv[1]

def timed(out, name, fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    out[name] = (time.perf_counter() - wall, time.process_time() - cpu)
    return result

def one_round():
    out = {}
    n = len(timed(out, "torchvision ImageFolder", lambda: ImageFolder(data)))
    lazy = timed(out, "ours: listing (lazy stats)", lambda: ImageFolderSource(data))
    timed(out, "ours: first digest (stat pass)", lazy.listing_digest)
    eager = timed(out, 'ours: listing, file_stats="listing"',
                  lambda: ImageFolderSource(data, file_stats="listing"))
    if not n == len(lazy) == len(eager) or lazy.listing_digest() != eager.listing_digest():
        raise SystemExit(f"listings differ: {n}, {len(lazy)}, {len(eager)} files")
    del lazy, eager
    for backend in ("dali", "torch"):
        loader = timed(out, f"make_loader, {backend}",
                       lambda: make_loader("image", data, backend=backend))
        passing = iter(loader)
        timed(out, f"  its first batch, {backend}", lambda: next(passing))
        timed(out, f"  closing it, {backend}", lambda: (passing.close(), loader.close()))
        del loader, passing
    out["files"] = n
    return out

one_round()  # imports, first builds: not timed
for line in sys.stdin:
    print(json.dumps(one_round()), flush=True)
'''

# A script starting cold: argv = [data, backend or "ImageFolder"]; one JSON line.
_FRESH = r'''
import json, sys, time
t0 = time.perf_counter()
if sys.argv[2] == "ImageFolder":
    from torchvision.datasets import ImageFolder
    t1 = time.perf_counter()
    ImageFolder(sys.argv[1])
    print(json.dumps({"import": t1 - t0, "ImageFolder": time.perf_counter() - t1}))
    sys.exit()
from torch_bridge import make_loader
t1 = time.perf_counter()
loader = make_loader("image", sys.argv[1], backend=sys.argv[2])
t2 = time.perf_counter()
passing = iter(loader)
next(passing)
t3 = time.perf_counter()
passing.close()
loader.close()
print(json.dumps({"import": t1 - t0, "make_loader": t2 - t1, "first batch": t3 - t2,
                  "close": time.perf_counter() - t3}))
'''


def make_tree(base: str, classes: int, per_class: int) -> str:
    """DIR/data with `classes` folders of `per_class` hard-linked JPEGs (made once)."""
    data = os.path.join(base, "data")
    marker = os.path.join(base, f".done-{classes}x{per_class}")
    if os.path.exists(marker):
        return data
    import numpy as np

    sys.path.insert(0, _HERE)
    from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
    os.makedirs(base, exist_ok=True)
    seeds = []
    for k in range((classes * per_class + _PER_SEED - 1) // _PER_SEED):
        seeds.append(os.path.join(base, f"seed_{k}.jpg"))
        with open(seeds[-1], "wb") as f:
            f.write(encode_jpeg(photo_like(np.random.default_rng(k), 64, 64)))
    for c in range(classes):
        folder = os.path.join(data, f"class_{c:04d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            target = os.path.join(folder, f"img_{i:06d}.jpg")
            if not os.path.exists(target):
                os.link(seeds[(c * per_class + i) // _PER_SEED], target)
    open(marker, "w").close()
    return data


def _python(tree: str, code: str, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=tree, env=env,
                            text=True, stdout=subprocess.PIPE, **kw)


def rounds(trees: dict[str, str], data: str, n: int) -> dict[str, dict[str, list]]:
    """{tree name: {row: [(wall, cpu), ...]}} over `n` interleaved rounds."""
    procs = {name: _python(tree, _WORKER, data, stdin=subprocess.PIPE)
             for name, tree in trees.items()}
    times: dict[str, dict[str, list]] = {name: {} for name in trees}
    try:
        for r in range(n):
            for name, proc in procs.items():
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("round\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit(f"the {name} tree's process stopped (see its stderr)")
                for row, value in json.loads(line).items():
                    times[name].setdefault(row, []).append(value)
                print(f"round {r + 1}, {name}: done", file=sys.stderr)
    finally:
        for proc in procs.values():
            proc.communicate(timeout=600)
    return times


def fresh(trees: dict[str, str], data: str, n: int) -> dict[tuple[str, str], list[dict]]:
    """{(tree name, backend): [timings of one cold process, ...]}, interleaved."""
    out: dict[tuple[str, str], list[dict]] = {}
    for _ in range(n):
        for backend in ("ImageFolder", "dali", "torch"):
            for name, tree in trees.items():
                if backend == "ImageFolder" and name != next(iter(trees)):
                    continue  # torchvision's, the same from every tree
                stdout, _ = _python(tree, _FRESH, data, backend).communicate(timeout=600)
                out.setdefault((name, backend), []).append(json.loads(stdout.splitlines()[-1]))
    return out


def _cell(values: list) -> str:
    walls = [w for w, _ in values]
    return (f"{statistics.median(walls):.3f} ({min(walls):.3f}), "
            f"CPU {statistics.median(c for _, c in values):.3f}")


def report(times: dict[str, dict[str, list]], cold: dict[tuple[str, str], list[dict]]) -> None:
    names = list(times)
    files = times[names[0]].pop("files")[0]
    for t in times.values():
        t.pop("files", None)
    print(f"{files} files; seconds: wall median (best), CPU median; "
          f"load average now {os.getloadavg()[0]:.1f}")
    print("| row | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for row in times[names[0]]:
        print(f"| {row} | " + " | ".join(_cell(times[n][row]) for n in names) + " |")
    for (name, backend), runs in cold.items():
        parts = ", ".join(f"{k} {statistics.median(r[k] for r in runs):.3f}"
                          for k in runs[0])
        what = "torchvision" if backend == "ImageFolder" else f"{name}, {backend}"
        print(f"fresh process, {what}: {parts} (medians of {len(runs)})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--per-class", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=None, help="another checkout to time alongside")
    parser.add_argument("--fresh", type=int, default=0, help="cold processes per backend")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    data = make_tree(args.dir, args.classes, args.per_class)
    trees = {"this tree": _HERE} if args.before is None else \
        {"before": os.path.abspath(args.before), "after": _HERE}
    print(f"load average at start {os.getloadavg()[0]:.1f}", file=sys.stderr)
    report(rounds(trees, data, args.rounds), fresh(trees, data, args.fresh))


if __name__ == "__main__":
    main()
