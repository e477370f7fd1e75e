"""CPU-ms per 16-frame 112x112 clip: full-size decode + resize against scaling in the decoder.

    python bench/studies/bench_video_scaled.py [--rounds 3] [--clips 8] [--out DIR]

Encodes (once, into --out) 96-frame clips panning over a photo-like image (keyframe every 32
frames): 640x360 and 1280x720 H.264 (libx264), and 1280x720 HEVC when PyAV has libx265.
Then, in interleaved rounds, one thread each, CPU time (process_time) per clip of:
- "before": `decode_frames_pyav(skip_unused=False)` (every frame from the keyframe decoded)
  full-size RGB, then `resize_clip` (torchvision, antialiased): the code before;
- "exact": the same with unused non-reference frames skipped (the default path now, same
  pixels as before);
- "after": `decode_frames_pyav(scale=(112, 112))` (the `scaled_decode` option: swscale
  scales while converting to RGB);
- "torchcodec": `VideoDecoder(num_ffmpeg_threads=1, transforms=[Resize((112, 112))])` and
  `get_frames_at` (torchcodec scales in its filter graph), when torchcodec is installed, one
  decoder per clip as a loader makes it; "torchcodec_approx": the same with
  seek_mode="approximate" (no scan of the file when it opens);
- "pyav": plain PyAV, seek to the keyframe, decode, `to_ndarray(width=112, height=112)`.
Clip starts are spread over the file; stride 2 clips (32 frames apart) and stride 1. Prints
the median over rounds, ratios, and the agreement of "after" with "before" (mean, p99 and
max absolute difference in grey levels, fraction of differing values).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SIZE = (112, 112)


def make_clip(path: Path, width: int, height: int, codec: str, frames: int = 96) -> Path:
    import av

    from dali_pipes.sample_data.sample_images import photo_like
    if path.exists():
        return path
    big = photo_like(np.random.default_rng(0), height + 2 * frames + 8, width + 3 * frames + 8)
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = width, height, \
            "yuv420p", 32
        for i in range(frames):
            crop = np.ascontiguousarray(big[2 * i:2 * i + height, 3 * i:3 * i + width])
            out.mux(stream.encode(av.VideoFrame.from_ndarray(crop, format="rgb24")))
        out.mux(stream.encode())
    return path


def _plain_pyav(path, info, index):
    import av
    got = {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        key = info.keyframe_at_or_before(int(index.min()))
        container.seek(int(info.pts[key]), stream=stream, backward=True)
        wanted = set(int(info.pts[i]) for i in index)
        for frame in container.decode(stream):
            if frame.pts in wanted:
                got[frame.pts] = frame.to_ndarray(width=SIZE[1], height=SIZE[0],
                                                  format="rgb24")
            if len(got) == len(wanted):
                break
    return np.stack([got[int(info.pts[i])] for i in index])


def decoders(path: Path):
    from dali_pipes.formats.video import decode_frames_pyav, probe_video
    from torch_bridge.modalities.clip_resize import resize_clip
    info = probe_video(path)
    out = {
        "before": lambda ix: resize_clip(
            decode_frames_pyav(path, ix, info=info, skip_unused=False)[0], SIZE),
        "exact": lambda ix: resize_clip(decode_frames_pyav(path, ix, info=info)[0], SIZE),
        "after": lambda ix: decode_frames_pyav(path, ix, info=info, scale=SIZE)[0],
        "pyav": lambda ix: _plain_pyav(path, info, ix),
    }
    try:
        from torchcodec.decoders import VideoDecoder
        from torchvision.transforms import v2
    except ImportError:
        print("torchcodec not installed: its column is skipped", file=sys.stderr)
        return info, out

    def torchcodec(ix, mode="exact"):
        dec = VideoDecoder(str(path), num_ffmpeg_threads=1, dimension_order="NHWC",
                           seek_mode=mode, transforms=[v2.Resize(SIZE)])
        return dec.get_frames_at(ix.tolist()).data.numpy()
    out["torchcodec"] = torchcodec
    out["torchcodec_approx"] = lambda ix: torchcodec(ix, "approximate")
    return info, out


def clips(info, n: int) -> list[np.ndarray]:
    starts = np.linspace(0, info.frame_count - 33, n).astype(int)
    return [s + np.arange(16) * (2 if k % 2 else 1) for k, s in enumerate(starts)]


def agreement(a: np.ndarray, b: np.ndarray) -> dict:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return {"mean": round(float(d.mean()), 2), "p99": float(np.percentile(d, 99)),
            "max": int(d.max()), "differing": round(float((d > 0).mean()), 3)}


def measure(path: Path, rounds: int, n: int) -> dict:
    info, fns = decoders(path)
    plan = clips(info, n)
    for fn in fns.values():
        fn(plan[0])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.process_time()
            for ix in plan:
                fn(ix)
            times[name].append(1e3 * (time.process_time() - t0) / len(plan))
    ms = {name: round(float(np.median(v)), 1) for name, v in times.items()}
    ref = np.concatenate([fns["before"](ix) for ix in plan])
    new = np.concatenate([fns["after"](ix) for ix in plan])
    return {"file": path.name, "size": f"{info.width}x{info.height}", "codec": info.codec,
            "cpu_ms_per_clip": ms,
            "before_over_exact": round(ms["before"] / ms["exact"], 2),
            "before_over_after": round(ms["before"] / ms["after"], 2),
            "torchcodec_over_after": (round(ms["torchcodec"] / ms["after"], 2)
                                      if "torchcodec" in ms else None),
            "torchcodec_approx_over_after": (round(ms["torchcodec_approx"] / ms["after"], 2)
                                             if "torchcodec" in ms else None),
            "agreement_after_vs_before": agreement(new, ref)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clips", type=int, default=8)
    p.add_argument("--out", default=None, help="folder for the encoded clips (default: tmp)")
    args = p.parse_args(argv)
    import av
    import torch
    torch.set_num_threads(1)
    root = Path(args.out or tempfile.mkdtemp(prefix="video-scaled-"))
    root.mkdir(parents=True, exist_ok=True)
    files = [make_clip(root / "h264_360.mp4", 640, 360, "libx264"),
             make_clip(root / "h264_720.mp4", 1280, 720, "libx264")]
    if "libx265" in av.codecs_available:
        files.append(make_clip(root / "hevc_720.mp4", 1280, 720, "libx265"))
    else:
        print("libx265 not in PyAV: the HEVC row is skipped", file=sys.stderr)
    rows = [measure(f, args.rounds, args.clips) for f in files]
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
