"""`python bench/gpu_check.py [--dry] [--out DIR]`: every check that needs a GPU, in one run
of a few minutes on one GPU, with a JSON report and a table.

Steps: the environment (versions, `python -m torch_bridge.doctor --json`); the other
`gpu`-marked tests (`pytest -m gpu --ignore=tests/gpu`: tests/gpu runs these same checks
under pytest, so `pytest -m gpu` alone covers them too); then each check of
bench/gpu_checks.py and bench/gpu_checks_device.py, every modality on "cuda" against DALI's
CPU backend on the same plan (tolerances in bench/gpu_checks.py), buffer reuse, streams,
resume, the adapter, LOCAL_RANK, the NVML mapping, images/s per preset and
`compare.py --device cuda` at batch 256 with the JPEG engine's utilisation.

`--dry` runs the same checks on the CPU with small data: DALI CPU against DALI CPU (exact)
and against the torch path, so the script itself is tested on machines without a GPU
(tests/bench/test_gpu_check.py). A check that does not apply says "skip". Exit status 1
when a check failed. Results: DIR/gpu_check.json and DIR/gpu_check.txt (default: $OUT, else
./gpu_check_out). See docs/gpu.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import gpu_checks as mc
from bench import gpu_checks_device as dc

ROOT = Path(__file__).resolve().parents[1]  # the checkout, where the subprocesses run


def checks(ctx) -> list[tuple[str, object]]:
    """(name, zero-argument callable) for every check, in run order."""
    out = [(f"image preset={p} train={t}", lambda p=p, t=t: mc.image_preset(ctx, p, t))
           for p in mc.PRESETS for t in (True, False)]
    out += [("image: DALI vs the torch path", lambda: mc.image_torch_path(ctx)),
            ("hyperspectral normalize=False", lambda: mc.hyperspectral(ctx, False)),
            ("hyperspectral normalize=True", lambda: mc.hyperspectral(ctx, True)),
            ("band statistics + PCA on the device's array module", lambda: mc.band_math(ctx))]
    for pad in ("repeat_last", "variable"):
        out += [(f"video VP9 pad={pad}", lambda pad=pad: mc.video(ctx, pad)),
                (f"frame folders pad={pad}", lambda pad=pad: mc.frame_folders(ctx, pad)),
                (f"fusion pad={pad}", lambda pad=pad: mc.fusion_clips(ctx, pad))]
    out += [("image recipe timm-rand-m9", lambda: mc.image_recipe(ctx, "timm-rand-m9")),
            ("image alpha='keep', adjust_orientation", lambda: mc.image_alpha(ctx)),
            ("detection train, masks", lambda: mc.detection(ctx, True)),
            ("detection eval, masks", lambda: mc.detection(ctx, False)),
            ("video short-side crops", lambda: mc.video_crops(ctx, False)),
            ("video multi-view eval", lambda: mc.video_crops(ctx, True)),
            ("video H.264", lambda: mc.video_h264(ctx)),
            ("clips NVDEC cannot take are routed, not blamed",
             lambda: mc.small_and_unsupported_clips(ctx)),
            ("held batches unchanged across epochs", lambda: dc.buffer_reuse(ctx)),
            ("busy consumer stream and side stream", lambda: dc.streams(ctx)),
            ("resume from state_dict", lambda: dc.resume(ctx)),
            ("adapter dali_from_dataset", lambda: dc.adapter(ctx)),
            ("LOCAL_RANK=1 with one visible GPU", lambda: dc.local_rank(ctx)),
            ("NVML handle is the CUDA device's", lambda: dc.nvml_mapping(ctx)),
            ("images/s per preset", lambda: dc.images_per_second(ctx)),
            ("compare.py images, JPEG engine used", lambda: dc.compare_cuda(ctx))]
    return out


def run_one(name: str, fn) -> dict:
    t0 = time.perf_counter()
    record = {"name": name}
    try:
        record.update(status="pass", result=fn())
    except RuntimeError as exc:
        if not str(exc).startswith("skip:"):
            record.update(status="fail", error=f"RuntimeError: {exc}"[:1500],
                          trace=traceback.format_exc()[-2500:])
        else:
            record.update(status="skip", reason=str(exc)[5:].strip())
    except Exception as exc:  # noqa: BLE001 - one failing check must not stop the others
        record.update(status="fail", error=f"{type(exc).__name__}: {exc}"[:1500],
                      trace=traceback.format_exc()[-2500:])
    record["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"[{record['status']:4}] {record['seconds']:6.1f}s  {name}", flush=True)
    return record


def environment(dry: bool) -> dict:
    import nvidia.dali as dali
    import torch
    env = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "dali": dali.__version__, "cuda_available": torch.cuda.is_available(),
           "dry": dry, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}",
                   memory_gib=round(props.total_memory / 2**30, 1))
    doctor = subprocess.run([sys.executable, "-m", "torch_bridge.doctor", "--json"],
                            capture_output=True, text=True, timeout=180, cwd=ROOT)
    try:
        env["doctor"] = [{k: c[k] for k in ("name", "status", "detail")}
                         for c in json.loads(doctor.stdout)["checks"]]
    except (ValueError, KeyError):
        env["doctor"] = f"doctor failed: {doctor.stderr[-800:]}"
    return env


def pytest_gpu(dry: bool) -> dict:
    if dry:
        raise RuntimeError("skip: the dry run has no GPU for the gpu-marked tests")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                          "-m", "gpu", "--ignore=tests/gpu", "tests"], capture_output=True,
                         text=True, timeout=240, cwd=ROOT)
    tail = run.stdout.strip().splitlines()[-15:]
    assert run.returncode in (0, 5), "\n".join(tail)  # 5: none collected
    return {"summary": tail[-1] if tail else ""}


def table(records: list[dict]) -> str:
    lines = [f"{'status':6} {'s':>6}  check", "-" * 78]
    for r in records:
        note = r.get("error") or r.get("reason") or _short(r.get("result"))
        lines.append(f"{r['status']:6} {r['seconds']:6.1f}  {r['name']}")
        if note:
            lines.append(f"{'':15}{note[:160]}")
    return "\n".join(lines)


def _short(result) -> str:
    return "" if result is None else json.dumps(result, default=str)[:160]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry", action="store_true", help="CPU only, small data")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT",
                                                                         "gpu_check_out")))
    parser.add_argument("--work", type=Path, help="data folder (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu_check_"))
    ctx = mc.dry_ctx(work) if args.dry else mc.Ctx("cuda", work)
    t0 = time.perf_counter()
    records = [run_one("environment and doctor", lambda: environment(args.dry)),
               run_one("pytest -m gpu (other gpu-marked tests)", lambda: pytest_gpu(args.dry))]
    records += [run_one(name, fn) for name, fn in checks(ctx)]
    failed = [r["name"] for r in records if r["status"] == "fail"]
    report = {"device": ctx.device, "dry": args.dry, "seconds": round(time.perf_counter() - t0, 1),
              "failed": failed, "checks": records}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    text = table(records) + f"\n\n{len(records) - len(failed)} ok or skipped, " \
                            f"{len(failed)} failed, {report['seconds']} s"
    (args.out / "gpu_check.txt").write_text(text + "\n")
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
