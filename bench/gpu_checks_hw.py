"""The checks of `bench/gpu_check.py` that prove the hardware was used and that nothing
stalls: which decoder took each clip (NVDEC, not the PyAV fallback), the JPEG engine's
(NVJPG) utilisation for full-image against region-of-interest decoding, the feed / graph /
hand-over milliseconds per batch with GPU and CPU utilisation, and `next(loader)` with a
busy training stream against an idle one. See bench/gpu_checks.py for `Ctx` and the data.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from bench.gpu_checks import CLIP, Ctx, big_images, epoch, loader, videos


def stage_ms(ld) -> dict:
    """Milliseconds per batch of the last pass's stages: feed (inputs prepared in Python),
    graph (waiting on DALI's outputs) and hand-over (outputs to torch, with the metadata)."""
    last = ld.stats()["last"]
    n = max(last["batches"], 1)
    names = {"feed": "feed_ms", "dali_run": "graph_ms", "transfer": "handover_ms"}
    return {out: round(last["stage_ms"].get(name, 0.0) / n, 3) for name, out in names.items()}


def decoders(ctx: Ctx) -> dict:
    """Every clip of VP9 and H.264 256x256 videos (sizes NVDEC takes) decoded by the graph's
    decoder, none by PyAV; on a GPU that decoder is NVDEC, and NVML's decoder utilisation
    is above 0 where it answers."""
    import av

    from bench.diagnosis.probes import EngineSampler
    codecs = ["libvpx-vp9"] + (["libx264"] if "libx264" in av.codecs_available else [])
    out = {}
    for codec in codecs:
        ld = loader(ctx, "video", videos(ctx, codec), config={"py_num_workers": 0}, **CLIP)
        with EngineSampler(_gpu_index(ctx)) as engines:
            batches = epoch(ld)
        counts = dict(ld.engine.modality.decodes)
        out[codec] = {"decodes": counts, "clips": sum(len(b["label"]) for b in batches),
                      "nvdec_util_percent": engines.mean("decoder")}
        if ctx.gpu:
            assert set(counts) == {"nvdec"}, f"{codec}: clips not on NVDEC: {counts}"
            util = engines.mean("decoder")
            assert util is None or util > 0, f"{codec}: NVDEC at 0% while decoding"
    return out


def _gpu_index(ctx: Ctx) -> int | None:
    return torch.cuda.current_device() if ctx.gpu else None


def jpeg_engine(ctx: Ctx) -> dict:
    """NVJPG utilisation and images/s decoding the same JPEGs whole (`decoders.image`) and
    as crop windows (`decoders.image_slice`, the default graph's decode) on the device."""
    from bench.diagnosis.probes import EngineSampler
    files = sorted(str(p) for p in big_images(ctx).rglob("*.jpg"))
    out = {}
    for mode in ("full", "roi"):
        pipe = _decode_pipe(files, mode, ctx)
        pipe.build()
        pipe.run()  # warm-up
        with EngineSampler(_gpu_index(ctx)) as engines:
            t0 = time.perf_counter()
            for _ in range(ctx.steps):
                pipe.run()
            seconds = time.perf_counter() - t0
        out[mode] = {"images_per_s": round(ctx.steps * ctx.big_batch / seconds, 1),
                     "nvjpg_util_percent": engines.mean("jpeg")}
        del pipe
    out["roi_keeps_nvjpg_busy"] = None if out["full"]["nvjpg_util_percent"] is None else \
        (out["roi"]["nvjpg_util_percent"] or 0) >= 0.5 * out["full"]["nvjpg_util_percent"]
    return out


def _decode_pipe(files: list[str], mode: str, ctx: Ctx):
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    device = "mixed" if ctx.gpu else "cpu"

    @pipeline_def(batch_size=ctx.big_batch, num_threads=4, device_id=_gpu_index(ctx),
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, _ = fn.readers.file(files=files, random_shuffle=False)
        if mode == "full":
            return fn.decoders.image(jpegs, device=device, output_type=types.RGB)
        return fn.decoders.image_slice(jpegs, (0.1, 0.1), (0.6, 0.6), device=device,
                                       output_type=types.RGB)
    return pipe()


def stages(ctx: Ctx) -> dict:
    """Feed / graph / hand-over ms per batch, GPU and CPU utilisation, for the default
    preset at ctx.big_batch."""
    from bench.metrics import ResourceSampler
    ld = loader(ctx, "image", big_images(ctx), batch_size=ctx.big_batch, size=224)
    epoch(ld, n=1)  # warm-up pass (builds the graph)
    with ResourceSampler(gpu_index=_gpu_index(ctx)) as res:
        for _b in ld:
            pass
        if ctx.gpu:
            torch.cuda.synchronize()
    return {**stage_ms(ld), "gpu_util_percent": res.gpu_util_percent,
            "process_cpu_percent": round(res.cpu_percent, 1), "gpu_note": res.gpu_note}


def busy_stream(ctx: Ctx) -> dict:
    """`next(loader)` while the training stream has ~`queued_ms` of matmuls queued, against
    an idle stream: with outputs handed over on the training stream (no host sync),
    next() returns before that work ends."""
    if not ctx.gpu:
        raise RuntimeError("skip: needs a GPU")
    ld = loader(ctx, "image", big_images(ctx), batch_size=64, size=224)
    it = _endless(ld)
    for _ in range(3):
        next(it)
    torch.cuda.synchronize()
    idle = _median_ms(lambda: next(it), 5)
    a = torch.randn(8192, 8192, device=ctx.device, dtype=torch.bfloat16)
    queued, busy = [], []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(60):
            a = (a @ a).clamp_(-1, 1)
        busy.append(_ms(lambda: next(it)))
        torch.cuda.synchronize()
        queued.append((time.perf_counter() - t0) * 1e3)
    out = {"idle_next_ms": idle, "busy_next_ms": round(float(np.median(busy)), 2),
           "queued_gpu_ms": round(float(np.median(queued)), 1)}
    assert out["busy_next_ms"] < 0.5 * out["queued_gpu_ms"], \
        f"next() waited for the training stream's queued work: {out}"
    return out


def _endless(ld):
    while True:
        yield from ld


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _median_ms(fn, n: int) -> float:
    return round(float(np.median([_ms(fn) for _ in range(n)])), 2)
