"""Benchmark: the same clips loaded from video files and from extracted frame folders.

The question "when does each path win", measured at loader level: VP9 files written
with a short and a long keyframe interval (GOP), the same videos extracted once with
`python -m dali_pipes.frames extract` (JPEG quality 90), and `make_loader("video", ...)` on the
DALI backend over each tree with the same seed, clip length, stride and output size. Rounds are
interleaved (video short GOP, video long GOP, frames, then again) and the median of each is
reported with process CPU time per clip (DALI's threads are in this process, so CPU time is
the steadier number on a shared machine) and the bytes each tree holds on disk.

    python bench/studies/bench_video_paths.py [--videos 16] [--frames 240] [--size 160 120]
        [--gops 12 120] [--clip-length 8] [--stride 1 4] [--batch 8] [--steps 12] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from bench.run_one import endless
from dali_pipes.sample_data.sample_images import cache_root
from dali_pipes.sample_data.sample_video import synthetic_frames, write_video
from dali_pipes.sources.frames import extract_tree


def make_tree(root: Path, *, videos: int, frames: int, size, gop: int, seed: int = 0) -> Path:
    """`root/class_k/clip_i.webm` (created once; `.complete` marks a finished tree)."""
    if (root / ".complete").exists():
        return root
    rng = np.random.default_rng(seed)
    for i in range(videos):
        label = i % 4
        write_video(root / f"class_{label}" / f"clip_{i:03d}.webm",
                    synthetic_frames(rng, frames, size[0], size[1], label), gop=gop)
    (root / ".complete").write_text("ok\n")
    return root


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def measure(data: Path, args, stride: int) -> tuple[float, float]:
    """(clips/s, CPU ms per clip) over `args.steps` batches after 2 warm-up batches."""
    from torch_bridge import make_loader
    loader = make_loader("video", str(data), backend="dali", batch_size=args.batch,
                         clip_length=args.clip_length, stride=stride, size=args.out_size,
                         seed=0)
    stream = endless(loader)
    for _ in range(2):
        next(stream)
    clips, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        clips += len(next(stream)["label"])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    loader.close()
    return clips / wall, 1e3 * cpu / clips


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--videos", type=int, default=16)
    p.add_argument("--frames", type=int, default=240)
    p.add_argument("--size", type=int, nargs=2, default=(160, 120), metavar=("W", "H"))
    p.add_argument("--gops", type=int, nargs="+", default=(12, 120))
    p.add_argument("--clip-length", type=int, default=8)
    p.add_argument("--stride", type=int, nargs="+", default=(1, 4))
    p.add_argument("--out-size", type=int, default=112)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--root", type=Path, default=None, help="where the trees are cached")
    args = p.parse_args(argv)

    base = args.root or cache_root() / "video-paths"
    tag = f"{args.videos}x{args.frames}f-{args.size[0]}x{args.size[1]}"
    trees = {}
    for gop in args.gops:
        trees[f"video gop {gop}"] = make_tree(base / f"{tag}-gop{gop}", videos=args.videos,
                                              frames=args.frames, size=args.size, gop=gop)
    frames_root = base / f"{tag}-gop{args.gops[0]}-frames"
    report = extract_tree(trees[f"video gop {args.gops[0]}"], frames_root, quality=90,
                          progress=False)
    if report.failed:
        raise SystemExit(f"frame extraction failed: {report.failed}")
    trees["frame folders"] = frames_root

    print(f"{args.videos} VP9 videos of {args.frames} frames at {args.size[0]}x{args.size[1]}, "
          f"clips of {args.clip_length}, batch {args.batch}, output {args.out_size}px, "
          f"{args.steps} batches x {args.rounds} interleaved rounds (medians)")
    print(f"{'tree':<18}{'disk MB':>9}{'stride':>8}{'clips/s':>10}{'CPU ms/clip':>13}")
    for stride in args.stride:
        runs = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, root in trees.items():
                runs[name].append(measure(root, args, stride))
        for name, got in runs.items():
            rate = statistics.median(r for r, _ in got)
            cpu = statistics.median(c for _, c in got)
            print(f"{name:<18}{tree_bytes(trees[name]) / 1e6:>9.2f}{stride:>8}"
                  f"{rate:>10.1f}{cpu:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
