"""Benchmark: a clip's crop window resized alone (fn.resize with a region of interest) against
the whole frame resized, then cropped (fn.resize + fn.crop), in the DALI video graph.

The question behind `resize="short_side"`'s graph (dali_pipes.pipelines.video): both give the
same pixels (tests/pipelines/test_video_pipeline.py); which costs less on DALI's CPU
backend? VP9 clips are decoded by DALI in both graphs (the same encoded segments, the same
plan windows, `dali_pipes.geometry.clip_crops`), so the difference is the resize. Rounds
alternate the two graphs; the median of each is reported with process CPU time per clip
(DALI's threads run in this process: the steadier number on a shared machine) and their
ratio.

    python bench/studies/bench_video_crops.py [--videos 8] [--size 320 180] [--short-side 128]
        [--crop 112] [--clip-length 8] [--batch 8] [--steps 6] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types

from bench.studies.bench_video_paths import make_tree
from dali_pipes import schema
from dali_pipes.geometry.clip_crops import clip_windows, source_roi
from dali_pipes.pipelines.config import PipelineConfig, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.video import build_video_pipeline
from dali_pipes.sample_data.sample_images import cache_root
from dali_pipes.sources.protocol import ClipRead
from dali_pipes.sources.video import VideoFolderSource


def _resize_then_crop(device: str, resized, size):
    """The alternative graph: decode, resize the whole frame, cut the window."""
    scalars = [i for i in schema.VIDEO_INPUTS
               if i.name in ("start_frame", "sequence_length", "stride")]  # the graph's own
    video, start, length, stride, anchor = external_inputs(
        (schema.Input("video", "uint8", 1), *scalars, schema.Input("anchor", "float32", 1)))
    frames = fn.decoders.video(video, device="cpu", start_frame=start, sequence_length=length,
                               stride=stride, pad_mode="edge")
    frames = fn.resize(frames, size=list(resized), antialias=True,
                       interp_type=types.INTERP_LINEAR)
    return fn.crop(frames, crop=list(size), crop_pos_y=anchor[0], crop_pos_x=anchor[1])


def feeds(src: VideoFolderSource, batch: int, step: int, args) -> tuple[dict, dict]:
    """(the video graph's feeds with roi, the alternative's) for one batch of clips."""
    index = (np.arange(batch) + step * batch) % len(src)
    info = [src.info(i) for i in index.tolist()]
    h, w = [i.height for i in info], [i.width for i in info]
    size = (args.crop, args.crop)
    windows = clip_windows(0, step, index, h, w, size=size, short_side=args.short_side,
                           train=True)
    start, end = source_roi(windows, h, w, size)
    segments, starts = [], []
    for i in index.tolist():
        frames = src.clip_frames(0, step, i, train=True)
        segment, first = src.read(i, ClipRead(frames))
        segments.append(segment)
        starts.append(first)
    common = {"video": segments, "start_frame": np.array(starts, np.int32),
              "sequence_length": np.full(batch, src.clip_length, np.int32),
              "stride": np.full(batch, src.stride, np.int32)}
    roi = dict(common, decoded=[np.zeros((1, 1, 1, 3), np.uint8)] * batch,
               use_dali=np.ones(batch, bool), mirror=np.zeros(batch, np.int32),
               timestamps=[np.zeros(src.clip_length)] * batch, crop_start=start,
               crop_end=end)
    room = windows[:, :2] - np.array(size)
    anchor = np.where(room > 0, windows[:, 2:] / np.maximum(room, 1), 0.0)
    return roi, dict(common, anchor=anchor.astype(np.float32))


def run(pipe, batches: list[dict]) -> tuple[float, float]:
    """(clips/s, CPU ms per clip) over the batches, after one warm-up batch."""
    pipe.build()
    for batch in [batches[0], *batches]:  # queued up front: the runs time the graph alone
        for name, value in batch.items():
            pipe.feed_input(name, value)
    pipe.run()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in batches:
        pipe.run()
    clips = sum(len(b["video"]) for b in batches)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return clips / wall, 1000 * cpu / clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--size", type=int, nargs=2, default=(320, 180), help="W H")
    parser.add_argument("--short-side", type=int, default=128)
    parser.add_argument("--crop", type=int, default=112)
    parser.add_argument("--clip-length", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = make_tree(cache_root() / f"crops_{args.size[0]}x{args.size[1]}_{args.videos}",
                     videos=args.videos, frames=60, size=args.size, gop=12)
    src = VideoFolderSource(Path(root), clip_length=args.clip_length, stride=2)
    made = [feeds(src, args.batch, step, args) for step in range(args.steps)]
    resized = clip_windows(0, 0, [0], [src.info(0).height], [src.info(0).width],
                           size=(args.crop, args.crop), short_side=args.short_side,
                           train=False)[0, :2]
    config = PipelineConfig()
    results: dict[str, list[tuple[float, float]]] = {"roi": [], "resize+crop": []}
    for _ in range(args.rounds):
        results["roi"].append(run(build_video_pipeline(
            device="cpu", batch_size=args.batch, config=config, size=(args.crop, args.crop),
            crop=True), [m[0] for m in made]))
        results["resize+crop"].append(run(define_pipeline(
            _resize_then_crop, device="cpu", batch_size=args.batch, config=config,
            resized=tuple(int(v) for v in resized), size=(args.crop, args.crop)),
            [m[1] for m in made]))
    print(f"{args.videos} VP9 videos {args.size[0]}x{args.size[1]}, clips of "
          f"{args.clip_length}, short side {args.short_side}, crop {args.crop}, batch "
          f"{args.batch}, {args.steps} steps x {args.rounds} rounds, {config.threads()} threads")
    medians = {}
    for name, rows in results.items():
        rate = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        medians[name] = (rate, cpu)
        print(f"{name:12s} {rate:8.1f} clips/s  {cpu:7.1f} CPU ms/clip")
    print(f"roi / resize+crop: {medians['roi'][0] / medians['resize+crop'][0]:.2f}x clips/s, "
          f"{medians['roi'][1] / medians['resize+crop'][1]:.2f}x CPU per clip")


if __name__ == "__main__":
    main()
