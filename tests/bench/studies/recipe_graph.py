"""A recipe's DALI image graph alone, on fixed inputs: images/s, cores busy, CPU ms per
image, operator count and per-thread CPU, with the policy as drawn, with every sample
drawing Identity (the cost of the branches themselves), or without the policy.

    python tests/bench/studies/recipe_graph.py [--recipe timm-rand-m9]
        [--variant policy|identity|none] [--pipelines 1] [--threads 0] [--steps 16]
        [--batch-size 64]

The first four plan batches of the built-in sample set are prepared once (the loader's
feeds) and fed in turn, so only the graph runs in the timed steps; with --pipelines N the
batches go round N pipelines (torch_bridge.engines._pipe_ring). CPU is the process's CPU time over
the timed steps; the thread line is each thread's CPU % over the middle of the run (the
busiest first). Run it with PYTHONPATH set to another checkout (and --pipelines 1) to
compare trees. It feeds the graph the engine's own prepared batches (torch_bridge.engines
internals), so the study lives beside the tests rather than in bench/.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[3]))  # after PYTHONPATH


def _thread_cpu(stop: threading.Event, out: list) -> None:
    import psutil
    proc = psutil.Process()
    if stop.wait(1.0):
        return
    a = {t.id: t.user_time + t.system_time for t in proc.threads()}
    t0 = time.perf_counter()
    if stop.wait(1.5):
        return
    b = {t.id: t.user_time + t.system_time for t in proc.threads()}
    span = time.perf_counter() - t0
    out.extend(sorted((round(100 * (b[k] - a.get(k, 0.0)) / span) for k in b),
                      reverse=True))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="timm-rand-m9")
    p.add_argument("--variant", choices=["policy", "identity", "none"], default="policy")
    p.add_argument("--pipelines", type=int, default=1)
    p.add_argument("--threads", type=int, default=0,
                   help="per pipeline (0: the engine's default share)")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)

    import numpy as np

    import dali_pipes.pipelines.image as image_graph
    from dali_pipes.sample_data.sample_images import image_dataset
    from torch_bridge import make_loader
    from torch_bridge.engines._feeders import PlanBatch

    loader = make_loader("image", image_dataset(), backend="dali", batch_size=args.batch_size,
                         seed=0, recipe=args.recipe)
    engine = loader._engine
    recipe = engine.modality.recipe
    feeds = [engine._prepare_here(PlanBatch(0, pos, idx, keys)).feeds
             for pos, idx, keys in list(engine.plan.keyed_batches(0, 0))[:4]]
    if args.variant == "none":
        recipe = dataclasses.replace(recipe, auto_augment=None)
        feeds = [{k: v for k, v in f.items() if not k.startswith("policy")} for f in feeds]
    elif args.variant == "identity":  # params of Identity: factors 1, flags 0, op index 0
        for f in feeds:
            f["policy_params"] = [np.concatenate([np.ones_like(a[:, :9]), np.zeros_like(
                a[:, 9:])], 1) for a in f["policy_params"]]
    config = engine.config
    if args.threads:
        config = dataclasses.replace(config, num_threads=args.threads)
    if args.pipelines > 1:  # as the engine builds a ring's members
        from torch_bridge.engines._pipe_ring import ring_member_config
        config = ring_member_config(config, args.pipelines)

    def build():
        return image_graph.build_image_pipeline(device="cpu", batch_size=args.batch_size,
                                                size=224, config=config, recipe=recipe)
    pipes = [build() for _ in range(args.pipelines)]
    if args.pipelines > 1:
        from torch_bridge.engines._pipe_ring import PipeRing
        pipe = PipeRing(pipes)
    else:
        pipe = pipes[0]
    pipe.build()
    depth = max(2, args.pipelines)

    def feed(k: int) -> None:
        for name, arrays in feeds[k % len(feeds)].items():
            pipe.feed_input(name, arrays)
    for k in range(depth if args.pipelines > 1 else config.prefetch_queue_depth):
        feed(k)
    pipe.schedule_run()

    def step(k: int) -> None:
        pipe.outputs()
        feed(k)
        pipe.schedule_run()
    for k in range(4):
        step(k)
    stop, per_thread = threading.Event(), []
    watcher = threading.Thread(target=_thread_cpu, args=(stop, per_thread), daemon=True)
    watcher.start()
    c0, t0 = time.process_time(), time.perf_counter()
    for k in range(args.steps):
        step(k)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stop.set()
    watcher.join()
    import os
    print(f"{args.variant}, {args.pipelines} pipeline(s) x {config.threads()} threads: "
          f"{args.steps * args.batch_size / wall:.0f} images/s, {cpu / wall:.2f} cores, "
          f"{cpu * 1e3 / args.steps / args.batch_size:.2f} CPU ms/image, "
          f"{len(pipes[0]._ops)} operators; threads' CPU % {per_thread[:8] or '(run too short)'}; "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
