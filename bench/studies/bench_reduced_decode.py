"""Reduced-scale JPEG decoding against DALI's decoders, side by side on the same work.

    python bench/studies/bench_reduced_decode.py [--data PATH] [--images 24] [--size 224]

On the large-photo set (dali_pipes/sample_data/sample_images.py, `--sample large` in compare.py)
each image
gets its random-resized-crop window of epoch 0 (the plan's, dali_pipes.geometry.draws). Timed,
one thread each, CPU ms per image (process CPU time, so DALI's worker thread counts):
  dali-roi-decode   fn.decoders.image_slice of the window (today's graph, decode only)
  dali-full-decode  fn.decoders.image of the whole file
  simplejpeg-scaled the whole file at the window's DCT scale, window pixels cut out
  dali-roi+resize   today's graph: window decode + antialiased resize to size x size
  scaled+resize     simplejpeg-scaled + DALI resize of exactly the window (the new graph)
Then the pixel difference of both graphs' uint8 resize against the reference: full
decode + the same antialiased resize of the same window (region of interest, sub-pixel).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def load(data: Path, n: int, size: int):
    from dali_pipes.geometry.draws import image_params
    from dali_pipes.sources.image import ImageFolderSource
    src = ImageFolderSource(data)
    got = [src.read(i) for i in range(min(n, len(src)))]
    hw = np.asarray([s for _, s in got], np.int64)
    windows, _ = image_params(0, 0, np.arange(len(got)), hw[:, 0], hw[:, 1], size=size,
                              train=True)
    return [d for d, _ in got], hw, windows.astype(np.int32)


def dali_run(graph, feeds: dict, batch: int) -> tuple[list[np.ndarray], float]:
    """Run `graph(**inputs)` (a function defining outputs) over all samples; (outputs,
    CPU seconds)."""
    from nvidia.dali import Pipeline
    n = len(next(iter(feeds.values())))
    pipe = Pipeline(batch_size=batch, num_threads=1, device_id=None, exec_dynamic=True,
                    prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(graph())
    pipe.build()
    outs, t0 = [], time.process_time()
    for lo in range(0, n, batch):
        for name, values in feeds.items():
            pipe.feed_input(name, values[lo:lo + batch])
        (out,) = pipe.run()
        outs += [np.asarray(out[i]) for i in range(len(out))]
    return outs, time.process_time() - t0


def measure(datas, hw, windows, size: int, batch: int = 8) -> dict:
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types

    from dali_pipes.formats.jpeg_scale import dct_factors, decode_scaled, scaled_boxes
    n = len(datas)
    ext = {name: (lambda name=name, dtype=dtype, nd=nd: fn.external_source(
        name=name, dtype=dtype, ndim=nd)) for name, dtype, nd in (
        ("jpegs", types.UINT8, 1), ("anchor", types.INT32, 1), ("shape", types.INT32, 1),
        ("pixels", types.UINT8, 3), ("start", types.FLOAT, 1), ("end", types.FLOAT, 1))}
    roi = dict(axis_names="HW", normalized_anchor=False, normalized_shape=False,
               output_type=types.RGB, use_fast_idct=True)

    def resize(images, start, end):
        return fn.resize(images, size=[size, size], antialias=True, roi_start=start,
                         roi_end=end, roi_relative=False, interp_type=types.INTERP_LINEAR)

    jp = {"jpegs": datas, "anchor": list(windows[:, :2]), "shape": list(windows[:, 2:])}
    full_start = windows[:, :2].astype(np.float32)
    full_end = (windows[:, :2] + windows[:, 2:]).astype(np.float32)
    cpu = {}
    _, cpu["dali-roi-decode"] = dali_run(lambda: fn.decoders.image_slice(
        ext["jpegs"](), ext["anchor"](), ext["shape"](), **roi), jp, batch)
    _, cpu["dali-full-decode"] = dali_run(lambda: fn.decoders.image(
        ext["jpegs"](), output_type=types.RGB, use_fast_idct=True), {"jpegs": datas}, batch)
    factors = dct_factors(windows, size)
    boxes, start, end = scaled_boxes(windows, factors, hw)
    t0 = time.process_time()
    cut = []
    for i in range(n):
        px = decode_scaled(datas[i], int(factors[i]), tuple(hw[i]), path=str(i))
        y0, x0, y1, x1 = boxes[i]
        cut.append(np.ascontiguousarray(px[y0:y1, x0:x1]))
    cpu["simplejpeg-scaled"] = time.process_time() - t0
    today, t_resize = dali_run(lambda: fn.resize(fn.decoders.image_slice(
        ext["jpegs"](), ext["anchor"](), ext["shape"](), **roi), size=[size, size],
        antialias=True, interp_type=types.INTERP_LINEAR), jp, batch)
    cpu["dali-roi+resize"] = t_resize
    scaled, t_scaled = dali_run(lambda: resize(ext["pixels"](), ext["start"](), ext["end"]()),
                                {"pixels": cut, "start": list(start), "end": list(end)}, batch)
    cpu["scaled+resize"] = t_scaled + cpu["simplejpeg-scaled"]
    ref, _ = dali_run(lambda: resize(fn.decoders.image(ext["jpegs"](), output_type=types.RGB,
                                                       use_fast_idct=True),
                                     ext["start"](), ext["end"]()),
                      {"jpegs": datas, "start": list(full_start), "end": list(full_end)},
                      batch)
    return {"cpu_ms_per_image": {k: 1e3 * v / n for k, v in cpu.items()},
            "factors": {str(f): int((factors == f).sum()) for f in (1, 2, 4, 8)},
            "diff_vs_full_decode": {"scaled": _diff(scaled, ref), "roi_decode": _diff(today, ref)}}


def _diff(outs, ref) -> dict:
    d = np.concatenate([np.abs(a.astype(np.int16) - b.astype(np.int16)).ravel()
                        for a, b in zip(outs, ref, strict=True)])
    return {"mean": float(d.mean()), "p99": float(np.percentile(d, 99)), "max": int(d.max())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, help="JPEG class folders (default: large photos)")
    p.add_argument("--images", type=int, default=24)
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args(argv)
    if args.data is None:
        from dali_pipes.sample_data.sample_images import large_photo_dataset
        args.data = large_photo_dataset()
    datas, hw, windows = load(args.data, args.images, args.size)
    print(json.dumps({"images": len(datas), "size": args.size,
                      **measure(datas, hw, windows, args.size)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
