"""The device-level checks of `bench/gpu_check.py` (shared with tests/gpu): buffer reuse
across epochs, a busy consumer stream and a side stream, resume, the Dataset adapter,
LOCAL_RANK with one visible GPU, the NVML mapping, and throughput (images/s per preset,
`compare.py --device cuda` at batch 256 with the hardware JPEG decoder's utilisation).
See bench/gpu_checks.py for `Ctx`, the data and the tolerances."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from bench.gpu_checks import (
    CLIP,
    IMAGE_TOL,
    PRESETS,
    Ctx,
    big_images,
    compare,
    epoch,
    images,
    large_photos,
    loader,
    on_device,
    videos,
)

ROOT = Path(__file__).resolve().parents[1]


def buffer_reuse(ctx: Ctx) -> dict:
    """Batches held by the consumer stay unchanged while DALI runs 2 more epochs."""
    ld = loader(ctx, "image", images(ctx), batch_size=8, size=224,
                config={"prefetch_queue_depth": 3})
    held = list(ld)
    copies = [{k: v.clone() for k, v in b.items()} for b in held]
    for _ in range(2):
        for _b in ld:
            pass
    for h, c in zip(held, copies, strict=True):
        for name in h:
            assert torch.equal(h[name], c[name]), f"a held batch's {name} changed"
    return {"batches": len(held)}


def streams(ctx: Ctx) -> dict:
    """The same batches while the consumer stream is busy with matmuls, and on a side
    stream (GPU only: on the CPU there are no streams)."""
    if not ctx.gpu:
        raise RuntimeError("skip: needs a GPU")
    kw = dict(batch_size=8, size=224)
    ref = epoch(loader(ctx, "image", images(ctx), "cpu", **kw))
    work = torch.randn(4096, 4096, device=ctx.device, dtype=torch.bfloat16)
    busy = []
    for b in loader(ctx, "image", images(ctx), **kw):
        for _ in range(8):
            work = (work @ work).clamp_(-1, 1)  # keeps the consumer stream busy
        busy.append({k: v.clone() for k, v in b.items()})
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = epoch(loader(ctx, "image", images(ctx), **kw))
    side.synchronize()
    return {"busy": compare(busy, ref, pixels="image", tol=IMAGE_TOL),
            "side_stream": compare(on_side, ref, pixels="image", tol=IMAGE_TOL)}


def resume(ctx: Ctx) -> dict:
    kw = dict(batch_size=4, size=64)
    full = epoch(loader(ctx, "image", images(ctx), **kw))
    first = loader(ctx, "image", images(ctx), **kw)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    second = loader(ctx, "image", images(ctx), **kw)
    second.load_state_dict(state)
    rest = epoch(second)
    assert rest, "nothing left to resume: the data set is too small for the check"
    return compare(rest, full[2:], pixels="image", tol=0.0)


def adapter(ctx: Ctx) -> dict:
    from bench.bench_adapter import FileDataset
    from dali_pipes.sources import ImageFolderSource
    from torch_bridge.integrations.adapter import dali_from_dataset
    src = ImageFolderSource(images(ctx))
    dataset = FileDataset([str(f) for f in src.files], src.labels)

    def make(device):
        return dali_from_dataset(dataset, None, batch_size=16, device=device, size=128,
                                 num_workers=0)
    got = epoch(make(ctx.device))
    on_device(ctx, got)
    return compare(got, epoch(make("cpu")), pixels="image",
                   tol=IMAGE_TOL if ctx.gpu else 0.0)


def local_rank(ctx: Ctx) -> dict:
    """LOCAL_RANK=1 with CUDA_VISIBLE_DEVICES naming one GPU: 'cuda' is that GPU."""
    if not ctx.gpu:
        raise RuntimeError("skip: needs a GPU")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    code = "from torch_bridge.loader import resolve_device; print(resolve_device('cuda'))"
    env = dict(os.environ, LOCAL_RANK="1", CUDA_VISIBLE_DEVICES=visible)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=ctx.timeout(120), cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "cuda:0", run.stderr[-800:]
    return {"resolved": run.stdout.strip()}


def nvml_mapping(ctx: Ctx) -> dict:
    if not ctx.gpu:
        raise RuntimeError("skip: needs a GPU")
    import pynvml

    from bench.metrics import nvml_handle
    index = torch.cuda.current_device()
    handle, note = nvml_handle(index, with_note=True)
    assert handle is not None, note
    name = pynvml.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else name
    assert name == torch.cuda.get_device_name(index), (name, torch.cuda.get_device_name(index))
    return {"gpu": name}


def rate(ld, batch: int, steps: int, sync, windows: int = 3) -> float:
    """Median samples/s over `windows` windows of `steps` batches, after 2 warm-up batches."""
    stream = _endless(ld)
    for _ in range(2):
        next(stream)
    rates = []
    for _ in range(windows):
        sync()
        t0, n = time.perf_counter(), 0
        for _ in range(steps):
            n += len(next(stream)["label"])
        sync()
        rates.append(n / (time.perf_counter() - t0))
    ld.close()
    return round(float(np.median(rates)), 1)


def throughput(ctx: Ctx) -> dict:
    """Images/s per preset at ctx.big_batch on the built-in set and on large photos, against
    the torch path on the device (16 workers, pinned) and DALI's CPU backend, median of 3
    windows; clips/s of VP9 256x256 through NVDEC (DALI) and PyAV (the torch path)."""
    sync = torch.cuda.synchronize if ctx.gpu else (lambda: None)
    steps, batch, out = max(ctx.steps // 3, 2), ctx.big_batch, {}
    sets = {"built-in": big_images(ctx)}
    if ctx.gpu:  # the dry run's CPU would take minutes over 3000-6000 px photos
        sets["large"] = large_photos(ctx, copies=-(-2 * batch // ctx.large_photos))
    torch_path = {"num_workers": 16 if ctx.gpu else 0, "pin_memory": ctx.gpu}
    for name, data in sets.items():
        rows = {f"dali {p}": (dict(config=p), ctx.device) for p in PRESETS}
        rows["dali cpu default"] = (dict(config="default"), "cpu")
        rows["torch"] = (dict(backend="torch", reference=torch_path), ctx.device)
        out[name] = {}
        for label, (kw, device) in rows.items():
            ld = loader(ctx, "image", data, device, batch_size=batch, size=224,
                        drop_last=False, **kw)
            out[name][label] = rate(ld, batch, steps, sync)
    clip = dict(CLIP, batch_size=8)
    out["clips_per_s"] = {
        "dali (NVDEC on a GPU)": rate(loader(ctx, "video", videos(ctx), **clip), 8, steps, sync),
        "torch (PyAV)": rate(loader(ctx, "video", videos(ctx), backend="torch",
                                    reference=torch_path, **clip), 8, steps, sync)}
    return {"images_per_s": out, "batch": batch, "steps_per_window": steps, "windows": 3}


def _endless(ld):
    while True:
        yield from ld


def compare_cuda(ctx: Ctx) -> dict:
    """`bench/compare.py --device cuda` on images at batch 256 while NVML samples the JPEG
    engine (NVJPG); its mean utilisation must be above 0 where the GPU has one. The dry
    run measures the DALI row alone (the torch row adds a process, not a path here)."""
    from bench.diagnosis.probes import EngineSampler
    device = "cuda" if ctx.gpu else "cpu"
    out_json = ctx.work / "compare.json"
    cmd = [sys.executable, "bench/compare.py", "--modality", "image", "--data",
           str(big_images(ctx)), "--device", device, "--batch-size", str(ctx.big_batch),
           "--steps", str(ctx.steps), "--warmup", "2",
           "--backends", "dali,torch" if ctx.gpu else "dali",
           "--repeats", str(ctx.repeats), "--json", str(out_json)]
    with EngineSampler(torch.cuda.current_device() if ctx.gpu else None) as engines:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=ctx.timeout(240),
                             cwd=ROOT)
    assert run.returncode == 0, run.stderr[-1500:]
    report = json.loads(out_json.read_text())
    jpeg = engines.mean("jpeg")
    if ctx.gpu and engines.samples["jpeg"]:
        assert jpeg and jpeg > 0, "the hardware JPEG decoder was not used (NVJPG at 0%)"
    return {"results": [{k: r.get(k) for k in ("backend", "samples_per_s",
                                               "gpu_util_percent")}
                        for r in report["results"]],
            "jpeg_util_percent": jpeg, "decoder_util_percent": engines.mean("decoder"),
            "gpu": report.get("env", {}).get("gpu")}
