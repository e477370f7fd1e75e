"""The image graph with the JPEG crop decoder (DpDecodeCropResize) against DALI's decoder,
side by side, and the decode-only ceiling; then the pixel agreement with the torch path.

    python bench/studies/bench_jpeg_partial.py [--images 96] [--rounds 3] [--large] [--real]

Sets: the built-in 500x375 images (dali_pipes/sample_data/sample_images.py) and "ImageNet-like"
photo-like images of random sizes 200-640 px (quality 90, 4:2:0, written to a temporary
folder); with --large also the large-photo set (3000-6000 px), with --real the crops of
real photos (200-640 px, dali_pipes/sample_data/sample_real.py). Each image gets its
random-resized-crop window of epoch 0 (dali_pipes.geometry.draws) and the default recipe's
output (224x224, normalized float32). CPU ms per image (process time, DALI with one
thread, batches of 16), medians over interleaved rounds:
  dali          the image graph with jpeg_partial_decode = false (image_slice + DpResize)
  partial       the image graph with jpeg_partial_decode = true (DpDecodeCropResize)
  partial+dct8  the same graph with 1/2-1/8 DCT scaling allowed
  feed-scaled   (large set) today's large-photo path: simplejpeg at the window's DCT scale
                in the feed, then the scaled graph (resize of the window + normalize)
  ceiling-fast  simplejpeg whole-file decode, fast integer IDCT (the peers' ceiling)
  ceiling-exact simplejpeg whole-file decode, exact IDCT (what our default decodes with)
  entropy-floor DpDecodeCropResize of each image's last pixel: every row above it is
                entropy-decoded and skipped, one iMCU is inverse-transformed; what any
                decoder of a crop pays, however small the window (Huffman coding does
                not let it skip the data before the window's last row)
Agreement (uint8 224x224, before normalisation): partial and partial+dct8 against
DALI's decoder + DpResize and against torchvision (decode_jpeg, crop, antialiased
bilinear resize): mean, p99, max absolute difference, fraction of differing values.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

SIZE, BATCH = 224, 16


def imagenet_like(folder: Path, n: int, seed: int = 0) -> list[bytes]:
    from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(200, 641, 2))
        out.append(encode_jpeg(photo_like(rng, h, w), quality=90))
        (folder / f"img_{i:04d}.jpg").write_bytes(out[-1])
    return out


def files_of(root: Path, n: int) -> list[bytes]:
    return [p.read_bytes() for p in sorted(root.rglob("*.jpg"))[:n]]


def windows_of(files: list[bytes]) -> np.ndarray:
    from dali_pipes.formats.jpeg_scan import jpeg_size
    from dali_pipes.geometry.draws import random_resized_crop
    hw = np.array([jpeg_size(f) for f in files])
    return random_resized_crop(0, 0, np.arange(len(files)), hw[:, 0], hw[:, 1]).astype(np.int32)


def graph(variant: str):
    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.pipelines.image import build_image_pipeline
    config = PipelineConfig(num_threads=1, prefetch_queue_depth=1,
                            jpeg_partial_decode=variant != "dali")
    return build_image_pipeline(device="cpu", batch_size=BATCH, size=SIZE, config=config,
                                max_dct_factor=8 if variant == "partial+dct8" else 1)


def run_graph(pipe, files, windows) -> float:
    """CPU seconds per image of `pipe` over all files (built already)."""
    t0 = time.process_time()
    for lo in range(0, len(files) - BATCH + 1, BATCH):
        sl = slice(lo, lo + BATCH)
        pipe.feed_input("jpegs", [np.frombuffer(f, np.uint8) for f in files[sl]])
        pipe.feed_input("anchor", [w[:2] for w in windows[sl]])
        pipe.feed_input("shape", [w[2:] for w in windows[sl]])
        pipe.feed_input("mirror", [np.array(0, np.int32)] * BATCH)
        pipe.run()
    return (time.process_time() - t0) / (len(files) // BATCH * BATCH)


def run_feed_scaled(files, windows) -> float:
    """CPU seconds per image of today's large-photo path: the feed decodes each window at
    its DCT scale with simplejpeg (one thread), the scaled graph resizes and normalizes."""
    from dali_pipes.formats.jpeg_scan import jpeg_size
    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.pipelines.image_scaled import build_scaled_image_pipeline
    from torch_bridge.modalities.image_scaled import decode_windows
    pipe = build_scaled_image_pipeline(batch_size=BATCH, size=SIZE, config=PipelineConfig(
        num_threads=1, prefetch_queue_depth=1))
    pipe.build()
    hw = np.array([jpeg_size(f) for f in files])
    t0 = time.process_time()
    for lo in range(0, len(files) - BATCH + 1, BATCH):
        sl = slice(lo, lo + BATCH)
        pixels, start, end = decode_windows(files[sl], hw[sl], windows[sl], size=SIZE,
                                            paths=["x"] * BATCH, fast_idct=False, threads=1)
        pipe.feed_input("pixels", pixels)
        pipe.feed_input("roi_start", list(start))
        pipe.feed_input("roi_end", list(end))
        pipe.feed_input("mirror", [np.array(0, np.int32)] * BATCH)
        pipe.run()
    return (time.process_time() - t0) / (len(files) // BATCH * BATCH)


def entropy_floor(files) -> float:
    """CPU seconds per image of decoding each image's bottom-right pixel alone."""
    import nvidia.dali.fn as fn
    from nvidia.dali import Pipeline

    from dali_pipes.formats.jpeg_scan import jpeg_size
    n = len(files) // BATCH * BATCH
    corners = [np.array([h - 1, w - 1], np.int32) for h, w in map(jpeg_size, files[:n])]
    pipe = Pipeline(batch_size=BATCH, num_threads=1, device_id=None, prefetch_queue_depth=1,
                    exec_dynamic=True)
    with pipe:
        j, a = fn.external_source(name="jpegs"), fn.external_source(name="anchor")
        pipe.set_outputs(fn.dp_decode_crop_resize(  # type: ignore[attr-defined]
            j, a, a * 0 + 1, size=[1, 1]))
    pipe.build()
    t0 = time.process_time()
    for lo in range(0, n, BATCH):
        pipe.feed_input("jpegs", [np.frombuffer(f, np.uint8) for f in files[lo:lo + BATCH]])
        pipe.feed_input("anchor", corners[lo:lo + BATCH])
        pipe.run()
    return (time.process_time() - t0) / n


def ceiling(files, fast: bool) -> float:
    import simplejpeg
    t0 = time.process_time()
    for f in files:
        simplejpeg.decode_jpeg(f, colorspace="RGB", fastdct=fast)
    return (time.process_time() - t0) / len(files)


def speed(files, windows, rounds: int, feed: bool = False) -> dict:
    pipes = {}
    for v in ("dali", "partial", "partial+dct8"):
        pipes[v] = graph(v)
        pipes[v].build()
        run_graph(pipes[v], files[:BATCH], windows[:BATCH])  # warm up
    extra = ("feed-scaled",) if feed else ()
    times: dict[str, list[float]] = {k: [] for k in (*pipes, *extra, "ceiling-fast",
                                                     "ceiling-exact", "entropy-floor")}
    for _ in range(rounds):
        for v, pipe in pipes.items():
            times[v].append(run_graph(pipe, files, windows))
        if feed:
            times["feed-scaled"].append(run_feed_scaled(files, windows))
        times["ceiling-fast"].append(ceiling(files, True))
        times["ceiling-exact"].append(ceiling(files, False))
        times["entropy-floor"].append(entropy_floor(files))
    return {k: round(1000 * float(np.median(t)), 3) for k, t in times.items()}


def uint8_outputs(files, windows, variant: str) -> list[np.ndarray]:
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import Pipeline

    from dali_pipes.pipelines.config import PipelineConfig
    from dali_pipes.pipelines.jpeg_partial import decode_crop_resize
    pipe = Pipeline(batch_size=BATCH, num_threads=1, device_id=None, exec_dynamic=True,
                    prefetch_queue_depth=1)
    with pipe:
        j, a, s = (fn.external_source(name=n) for n in ("jpegs", "anchor", "shape"))
        if variant == "dali":
            img = fn.decoders.image_slice(j, a, s, axis_names="HW", normalized_anchor=False,
                                          normalized_shape=False, output_type=types.RGB)
            img = fn.dp_resize(img, types.Constant(np.array([SIZE, SIZE], np.int32)))
        else:
            img = decode_crop_resize(j, a, s, (SIZE, SIZE), config=PipelineConfig(),
                                     interpolation="bilinear",
                                     max_dct_factor=8 if variant == "partial+dct8" else 1)
        pipe.set_outputs(img)
    pipe.build()
    out = []
    for lo in range(0, len(files) - BATCH + 1, BATCH):
        sl = slice(lo, lo + BATCH)
        pipe.feed_input("jpegs", [np.frombuffer(f, np.uint8) for f in files[sl]])
        pipe.feed_input("anchor", [w[:2] for w in windows[sl]])
        pipe.feed_input("shape", [w[2:] for w in windows[sl]])
        (o,) = pipe.run()
        out += [np.array(o[i]) for i in range(BATCH)]
    return out


def torchvision_outputs(files, windows) -> list[np.ndarray]:
    import torch
    import torchvision.io as tio
    import torchvision.transforms.v2.functional as F
    out = []
    for f, (t, x, h, w) in zip(files, windows.tolist(), strict=True):
        img = tio.decode_jpeg(torch.frombuffer(bytearray(f), dtype=torch.uint8))
        crop = F.resize(img[:, t:t + h, x:x + w], [SIZE, SIZE], antialias=True)
        out.append(crop.permute(1, 2, 0).numpy())
    return out


def stats(a: list[np.ndarray], b: list[np.ndarray]) -> dict:
    d = np.concatenate([np.abs(x.astype(np.int16) - y).ravel() for x, y in zip(a, b, strict=True)])
    return {"mean": round(float(d.mean()), 4), "p99": float(np.percentile(d, 99)),
            "max": int(d.max()), "differing": round(float((d > 0).mean()), 4)}


def agreement(files, windows) -> dict:
    n = len(files) // BATCH * BATCH
    files, windows = files[:n], windows[:n]
    dali = uint8_outputs(files, windows, "dali")
    tv = torchvision_outputs(files, windows)
    out = {"dali-vs-torchvision": stats(dali, tv)}
    for v in ("partial", "partial+dct8"):
        mine = uint8_outputs(files, windows, v)
        out[f"{v}-vs-dali"] = stats(mine, dali)
        out[f"{v}-vs-torchvision"] = stats(mine, tv)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=96)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--large", action="store_true", help="also the large-photo set")
    p.add_argument("--real", action="store_true", help="also the crops of real photos "
                   "(dali_pipes/sample_data/sample_real.py; needs scikit-image)")
    args = p.parse_args()
    from dali_pipes import native
    from dali_pipes.sample_data.sample_images import image_dataset, large_photo_dataset
    if native.library("decode_crop_op") is None:
        raise SystemExit(f"DpDecodeCropResize unavailable: {native.why_not('decode_crop_op')}")
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"built-in 500x375": files_of(image_dataset(), args.images),
                "ImageNet-like 200-640 px": imagenet_like(Path(tmp), args.images)}
        if args.large:
            sets["large 3000-6000 px"] = files_of(large_photo_dataset(), 48)
        if args.real:
            from dali_pipes.sample_data.sample_real import real_photo_crops
            sets["real crops 200-640 px"] = files_of(real_photo_crops(), args.images)
        for name, files in sets.items():
            windows = windows_of(files)
            row = {"set": name, "images": len(files), "cpu_ms": speed(
                files, windows, args.rounds, feed=name.startswith("large"))}
            row["agreement"] = agreement(files, windows)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
