"""One DALI pipeline against a ring of several taking batches in turn (config `pipelines`),
on a recipe's graph, side by side in one run.

    python bench/studies/bench_pipe_ring.py [--recipe timm-rand-m9] [--counts 1 2] [--rounds 3]
                                    [--steps 10] [--warmup 3] [--batch-size 64]

Each (count, round) runs in its own process on the built-in sample set, rounds interleaved
(1, 2, 1, 2, ...); prints images/s and CPU ms per image (the process's CPU time over the
timed steps) per count, medians with min-max, and the 1-minute load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, time
from dali_pipes.sample_data.sample_images import image_dataset
from torch_bridge import make_loader
recipe, count, steps, warmup, batch = sys.argv[1], *map(int, sys.argv[2:6])
loader = make_loader("image", image_dataset(), backend="dali", batch_size=batch, seed=0,
                     recipe=recipe, config={"pipelines": count})
def endless():
    while True:
        yield from loader
it = endless()
for _ in range(warmup):
    next(it)
c0, t0 = time.process_time(), time.perf_counter()
for _ in range(steps):
    next(it)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"images_per_s": steps * batch / wall, "cpu_ms": cpu * 1e3 / steps / batch}))
'''


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="timm-rand-m9")
    p.add_argument("--counts", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    results: dict[int, list[dict]] = {c: [] for c in args.counts}
    loads = []
    for r in range(args.rounds):
        for count in args.counts:
            out = subprocess.run([sys.executable, "-c", CHILD, args.recipe, str(count),
                                  str(args.steps), str(args.warmup), str(args.batch_size)],
                                 env=env, cwd=root, capture_output=True, text=True,
                                 check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            results[count].append(res)
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1}: pipelines={count} {res['images_per_s']:.0f} images/s, "
                  f"{res['cpu_ms']:.2f} CPU ms/image", flush=True)
    for count, runs in results.items():
        rate = [x["images_per_s"] for x in runs]
        cpu = [x["cpu_ms"] for x in runs]
        print(f"pipelines={count}: {statistics.median(rate):.0f} images/s "
              f"({min(rate):.0f}-{max(rate):.0f}), {statistics.median(cpu):.2f} CPU ms/image")
    print(f"1-minute load average {min(loads):.1f}-{max(loads):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
