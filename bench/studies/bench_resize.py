"""The image graph's resize alone: the fused CPU operator (DpResize, dali_pipes/native)
against DALI's fn.resize and torchvision's uint8 antialiased resize, on the same decoded
photo-like images, side by side in one run.

    python bench/studies/bench_resize.py [--images 32] [--rounds 3] [--reps 10] [--threads 1]

Per interpolation (bilinear, bicubic antialiased) and output size, prints the CPU ms per
image of each (the process's CPU time over the repetitions, medians over interleaved
rounds; torch on one intra-op thread, DALI with --threads threads) and the mean |diff| in
uint8 levels of each DALI resize from torchvision's pixels.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[2]))

SHAPES = [(375, 500), (300, 280), (160, 420), (224, 224), (450, 200), (224, 300), (500, 375),
          (250, 333)]
SIZES = [(224, 224), (160, 160), (400, 520)]


def _images(n: int) -> list[np.ndarray]:
    from dali_pipes.sample_data.sample_images import photo_like
    rng = np.random.default_rng(0)
    return [np.ascontiguousarray(photo_like(rng, *SHAPES[i % len(SHAPES)])) for i in range(n)]


def _pipe(images, size, interpolation: str, native: bool, threads: int):
    import nvidia.dali.fn as fn
    from nvidia.dali import Pipeline

    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.pipelines.resize import resize

    pipe = Pipeline(batch_size=len(images), num_threads=threads, device_id=None,
                    prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=lambda: images, layout="HWC")
        pipe.set_outputs(resize(x, size, device="cpu", interpolation=interpolation,
                                config=PipelineConfig(native_ops=native)))
    pipe.build()
    return pipe


def _cpu_ms(run, reps: int, n: int) -> float:
    run()
    t = time.process_time()
    for _ in range(reps):
        run()
    return (time.process_time() - t) / reps / n * 1e3


def main(argv=None) -> None:
    import torch
    from torchvision.transforms.v2 import functional as F

    from dali_pipes import native

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    if native.library("resize_op") is None:
        raise SystemExit(f"the fused resize is unavailable: {native.why_not('resize_op')}")
    torch.set_num_threads(1)
    images = _images(args.images)
    tensors = [torch.from_numpy(im).permute(2, 0, 1) for im in images]
    print(f"{'interpolation':13s} {'size':>9s} {'fused ms':>9s} {'fn.resize':>9s} "
          f"{'torch':>7s} {'fused/torch diff':>16s} {'fn.resize/torch':>15s}")
    for interpolation in ("bilinear", "bicubic"):
        mode = getattr(F.InterpolationMode, interpolation.upper())
        for size in SIZES:
            pipes = {k: _pipe(images, size, interpolation, k == "fused", args.threads)
                     for k in ("fused", "dali")}
            outs = {k: [np.asarray(o) for o in pipe.run()[0]] for k, pipe in pipes.items()}
            ref = [F.resize(t, list(size), interpolation=mode, antialias=True)
                   .permute(1, 2, 0).numpy() for t in tensors]
            diff = {k: float(np.mean([np.abs(a.astype(int) - b.astype(int)).mean()
                                      for a, b in zip(v, ref, strict=True)]))
                    for k, v in outs.items()}
            times: dict[str, list[float]] = {"fused": [], "dali": [], "torch": []}
            for _ in range(args.rounds):
                for k, pipe in pipes.items():
                    times[k].append(_cpu_ms(pipe.run, args.reps, len(images)))
                times["torch"].append(_cpu_ms(
                    lambda size=size, mode=mode: [F.resize(t, list(size), interpolation=mode,
                                                           antialias=True) for t in tensors],
                    args.reps, len(images)))
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{interpolation:13s} {size[0]:>4d}x{size[1]:<4d} {med['fused']:9.3f} "
                  f"{med['dali']:9.3f} {med['torch']:7.3f} {diff['fused']:16.3f} "
                  f"{diff['dali']:15.3f}")


if __name__ == "__main__":
    main()
