"""Benchmark: DALI CPU `fn.decoders.video` against `decode_frames_pyav` for the same clips.

Writes VP9 files (WebM) of a short and a long length, draws random clip starts with
`dali_pipes.geometry.clips`, and decodes the same clips three ways:
- `decode_frames_pyav`: seeks to the keyframe before each clip, decodes forward to its end;
- DALI, whole file: each file's whole bytes through `external_source`, with per-sample
  `start_frame` / `sequence_length` / `stride` (pad_mode="edge");
- DALI, keyframe segment: the packets from the keyframe before the clip to its last frame,
  remuxed (no decoding) with PyAV into a small in-memory Matroska file, and `start_frame`
  shifted by that keyframe's index (a prototype; packets of open-GOP codecs that precede the
  keyframe in presentation order are not handled).
Prints wall and process-CPU ms per clip (CPU time is the steadier number on a shared machine)
and the mean/max absolute difference of DALI's frames from PyAV's: the same frames give a mean
of about 2 levels; the max comes from sharp colour edges, where DALI and swscale upsample
chroma differently. Then DALI's whole-file cost for one clip at a few start frames.

    python bench/studies/bench_video_decode.py [--frames 60 1800] [--size 320 240] [--gop 30]
                                       [--clip-length 8] [--stride 2] [--batch 8] [--iters 3]
                                       [--repeat 3]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from dali_pipes.formats.video import (
    clear_probe_cache,
    decode_frames_pyav,
    probe_video,
    remux_segment,
)
from dali_pipes.geometry.clips import clip_frame_indices, clip_starts


def write_vp9(path: Path, n: int, width: int, height: int, gop: int, fps: int = 30) -> Path:
    """A moving gradient with a little noise, so VP9 has real motion to code."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libvpx-vp9", rate=fps,
                                      options={"deadline": "realtime", "cpu-used": "8"})
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = width, height, "yuv420p", gop
        for i in range(n):
            rgb = np.stack([(x + 3 * i) % 256, (y + 2 * i) % 256, (x + y + i) % 256], -1)
            rgb = (rgb + rng.integers(0, 16, rgb.shape)).clip(0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        container.mux(stream.encode())
    return path


def dali_pipeline(batch: int, clip_length: int, stride: int, threads: int, feed):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, prefetch_queue_depth=1)
    def pipe():
        encoded, start = fn.external_source(source=feed, num_outputs=2, batch=True,
                                            dtype=[types.UINT8, types.INT32])
        return fn.decoders.video(encoded, device="cpu", start_frame=start,
                                 sequence_length=clip_length, stride=stride, pad_mode="edge")

    p = pipe()
    p.build()
    return p


def clips(args, info, iteration: int):
    index = np.arange(args.batch)
    counts = np.full(args.batch, info.frame_count)
    start = clip_starts(0, iteration, index, counts, clip_length=args.clip_length,
                        stride=args.stride, train=True)
    return start, clip_frame_indices(start, counts, args.clip_length, args.stride)[0]


def feeder(path: Path, info, plan, segments: bool):
    """external_source callback: per batch, (encoded bytes, start frame) for each clip."""
    batches = iter(plan)

    def feed():
        start, indices = next(batches)
        if not segments:
            return ([np.fromfile(path, np.uint8) for _ in start],
                    [np.array(s, np.int32) for s in start])
        cut = [remux_segment(info, int(row[0]), int(row[-1])) for row in indices]
        return ([data for data, _ in cut],
                [np.array(s - key, np.int32) for s, (_, key) in zip(start, cut, strict=True)])
    return feed


def median_per_clip(args, run_batch) -> tuple[float, float]:
    """Median over --repeat runs of (wall seconds, process CPU seconds) per clip."""
    runs = []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        for k in range(args.iters):
            run_batch(k)
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return tuple(float(x) / (args.iters * args.batch) for x in np.median(runs, axis=0))


def time_dali(args, path, info, threads: int, segments: bool):
    plan = [clips(args, info, k) for k in range(args.iters * args.repeat + 1)]
    pipe = dali_pipeline(args.batch, args.clip_length, args.stride, threads,
                         feeder(path, info, plan, segments))
    first = [np.array(t) for t in pipe.run()[0]]  # warm-up, kept for the frame check
    per_clip = median_per_clip(args, lambda k: pipe.run())
    ref = [decode_frames_pyav(path, row, info=info)[0].astype(int) for row in plan[0][1]]
    diff = np.concatenate([np.abs(a.astype(int) - b).ravel()
                           for a, b in zip(first, ref, strict=True)])
    return per_clip, f"{diff.mean():.1f}/{diff.max()}"


def time_pyav(args, path, info):
    plan = [clips(args, info, k)[1] for k in range(args.iters)]
    decode_frames_pyav(path, plan[0][0], info=info)  # warm-up

    def run_batch(k):
        for row in plan[k]:
            decode_frames_pyav(path, row, info=info)
    return median_per_clip(args, run_batch)


def run_one(args, folder: Path, n: int) -> None:
    path = write_vp9(folder / f"vp9_{n}.webm", n, args.size[0], args.size[1], args.gop)
    clear_probe_cache()
    t0 = time.perf_counter()
    info = probe_video(path)
    head = f"{n:6d} {path.stat().st_size / 1e3:7.0f} {(time.perf_counter() - t0) * 1e3:6.1f}"
    rows = [("decode_frames_pyav", 1, time_pyav(args, path, info), "-")]
    for segments in (False, True):
        for threads in (1, 2):
            name = "DALI, keyframe segment" if segments else "DALI, whole file"
            rows.append((name, threads, *time_dali(args, path, info, threads, segments)))
    for name, threads, (wall, cpu), diff in rows:
        print(f"{head} {name:>22} {threads:7d} {wall * 1e3:7.1f} {1 / wall:7.0f} "
              f"{cpu * 1e3:7.1f} {diff:>9}")


def start_sweep(args, path: Path, info) -> None:
    """DALI whole-file CPU ms for one clip at a few start frames (does it seek?)."""
    n = info.frame_count
    starts = sorted({0, int(info.keyframes[min(1, len(info.keyframes) - 1)]) + 1, n // 2,
                     max(n - args.clip_length * args.stride, 0)})
    cells = []
    for start in starts:
        plan = [(np.array([start]), None)] * (args.repeat + 1)
        pipe = dali_pipeline(1, args.clip_length, args.stride, 1,
                             feeder(path, info, plan, segments=False))
        pipe.run()
        cpu = time.process_time()
        for _ in range(args.repeat):
            pipe.run()
        cells.append(f"start {start}: {(time.process_time() - cpu) / args.repeat * 1e3:.1f}")
    print(f"DALI whole file, {n} frames, CPU ms per clip by start frame: " + ", ".join(cells))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[60, 1800])
    parser.add_argument("--size", type=int, nargs=2, default=[320, 240], metavar=("W", "H"))
    parser.add_argument("--gop", type=int, default=30)
    parser.add_argument("--clip-length", type=int, default=8)
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"VP9 {args.size[0]}x{args.size[1]}, keyframe every {args.gop}, clip "
          f"{args.clip_length} x stride {args.stride}, batch {args.batch}; median of "
          f"{args.repeat} runs of {args.iters} batches")
    print(f"{'frames':>6} {'KB':>7} {'probe':>6} {'method':>22} {'threads':>7} {'ms/clip':>7} "
          f"{'clips/s':>7} {'CPU ms':>7} {'diff vs PyAV (mean/max)':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.frames:
            run_one(args, Path(folder), n)
        longest = Path(folder) / f"vp9_{max(args.frames)}.webm"
        start_sweep(args, longest, probe_video(longest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
