"""Bytes fetched per 16-frame clip of a 60 s H.264 file in S3, and clips/s against local files.

    python bench/studies/bench_video_stores.py [--clips 40] [--seconds 60] [--size 640x360]

Writes one 60 s H.264 MP4 (PyAV's libx264, 30 fps, a keyframe every 2 s, `veryfast`;
moving gradients with noise), puts it in moto's S3 server on 127.0.0.1 as a class folder
and inside a WebDataset shard, and reads `--clips` 16-frame clips at random starts:

- bytes asked of the store per clip, against the file's size: the probe (once per file),
  each clip decoded with PyAV (the torch path and the DALI fallback) and each clip's
  segment for DALI's decoder (`remux_segment`), without a block cache (every byte asked is
  fetched) and with one (1 MiB blocks: the blocks missed);
- clips/s decoding with PyAV from the local file, from S3 cold (no cache), and from S3
  through the block cache cold and warm (a second pass over the same clips).
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from dali_pipes.sources.protocol import ClipRead, DecodedClipRead

CLIP = 16


def write_long_video(path: Path, seconds: int, size: tuple[int, int]) -> Path:
    """A `seconds` long H.264 MP4 at 30 fps of moving gradients with noise."""
    import av
    w, h = size
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w]
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"preset": "veryfast",
                                                             "crf": "23"})
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = w, h, "yuv420p", 60
        for t in range(seconds * 30):
            base = np.stack([(xx + 3 * t) % 256, (yy + 2 * t) % 256,
                             (xx + yy + t) % 256], -1).astype(np.int16)
            img = (base + rng.integers(-12, 12, base.shape)).clip(0, 255).astype(np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        out.mux(stream.encode())
    return path


def _clip_bytes(source, starts) -> dict[str, list[int]]:
    """Bytes asked of the store per clip: PyAV decode, then the DALI segment."""
    out: dict[str, list[int]] = {"decode": [], "segment": []}
    for start in starts:
        frames = np.arange(start, start + CLIP)
        for what, request in (("decode", DecodedClipRead(frames)), ("segment", ClipRead(frames))):
            before = source.fetched()[0]
            source.read(0, request)
            out[what].append(source.fetched()[0] - before)
    return out


def _clips_per_s(source, starts) -> float:
    t0 = time.perf_counter()
    for start in starts:
        source.read(0, DecodedClipRead(np.arange(start, start + CLIP)))
    return len(starts) / (time.perf_counter() - t0)


def main(argv=None) -> int:
    from dali_pipes.sample_data.video_shards import write_video_shards
    from dali_pipes.sources.video import VideoFolderSource
    from dali_pipes.sources.video_shards import VideoShardSource
    from dali_pipes.stores.remote import FsspecStore
    from tests.stores.servers import MotoS3
    from tests.stores.test_s3_folders import _upload
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clips", type=int, default=40)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--size", default="640x360")
    args = p.parse_args(argv)
    size = tuple(int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="video_stores-"))
    video = write_long_video(work / "train" / "class_0" / "long.mp4", args.seconds, size)
    write_video_shards(work / "train", work / "shards")
    total = video.stat().st_size
    local = VideoFolderSource(work / "train", clip_length=CLIP)
    n = local.frame_count(0)
    starts = np.random.default_rng(1).integers(0, n - CLIP, args.clips)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    import os
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with MotoS3() as s3:
        url = _upload(s3, work / "train", "bench", "train")
        shard_url = s3.upload(work / "shards", "bench", "shards")
        remote = VideoFolderSource(url, clip_length=CLIP,
                                   store=FsspecStore(storage_options=s3.options))
        shard = VideoShardSource(shard_url, clip_length=CLIP,
                                 store=FsspecStore(storage_options=s3.options))
        rows = []
        for name, source in (("S3 object", remote), ("S3 shard member", shard)):
            source.info(0)
            probe = source.fetched()[0]
            got = _clip_bytes(source, starts)
            rows.append((name, probe, got))
        cached = VideoFolderSource(url, clip_length=CLIP, store=FsspecStore(
            storage_options=s3.options, cache_dir=str(work / "cache")))
        speeds = {"local file": _clips_per_s(local, starts),
                  "S3, no cache": _clips_per_s(VideoFolderSource(
                      url, clip_length=CLIP, store=FsspecStore(storage_options=s3.options)),
                      starts),
                  "S3, block cache cold": _clips_per_s(cached, starts),
                  "S3, block cache warm": _clips_per_s(cached, starts)}
        block = cached.store.cache.block_size
        cache_bytes = cached.store.cache.misses * block
    _report(args, size, total, n, rows, speeds, cache_bytes)
    return 0


def _report(args, size, total, n, rows, speeds, cache_bytes) -> None:
    print(f"file: {args.seconds} s H.264 (libx264 veryfast crf 23, keyframe every 2 s), "
          f"{size[0]}x{size[1]}, {n} frames, {total / 1e6:.2f} MB; {args.clips} clips of "
          f"{CLIP} frames\n")
    print("| read from | probe (once per file) | PyAV clip: median / max | "
          "DALI segment: median / max |")
    print("|---|---|---|---|")
    for name, probe, got in rows:
        cells = [f"{np.median(v) / 1e3:.0f} KB ({np.median(v) / total:.1%}) / "
                 f"{np.max(v) / total:.1%}" for v in (got["decode"], got["segment"])]
        print(f"| {name} | {probe / 1e3:.0f} KB ({probe / total:.1%}) | {cells[0]} | "
              f"{cells[1]} |")
    print(f"\nwith a 1 MiB block cache: {cache_bytes / 1e6:.1f} MB fetched for the probe and "
          f"{args.clips} clips ({cache_bytes / total:.0%} of the file)\n")
    print("| PyAV clips from | clips/s | vs local |")
    print("|---|---|---|")
    for name, rate in speeds.items():
        print(f"| {name} | {rate:.1f} | {rate / speeds['local file']:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
