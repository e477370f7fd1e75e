"""`python bench/gpu_check.py [--dry] [--out DIR] [--work DIR] [--deadline S] [--only TEXT]`:
every check that needs a GPU, in one command of a few minutes on one GPU.

Order: the preflight (driver, libnvcuvid, imports of torch, CuPy and DALI; nothing else
runs when it fails), the environment, correctness (every modality on "cuda" against DALI's
CPU backend on the same plan, the torch path per preset, recipes, output formats, large
photos), proof that the hardware ran (which decoder took each clip, NVJPG for full-image
and ROI decoding, feed / graph / hand-over ms with GPU and CPU utilisation), stalls (a busy
training stream), device plumbing (buffer reuse, resume, the adapter, LOCAL_RANK, NVML),
the other gpu-marked tests, and throughput last.

`--deadline S` (default 540) bounds the whole run: each subprocess's timeout is clipped to
the time left, a check not started in time is "not_run", and a check still running at the
deadline is recorded as failed with every thread's stack, after which the process exits 3
(bench/gpu_report.py). DIR/gpu_check.json and DIR/gpu_check.txt are rewritten after every
check, so a killed run leaves every finished check. `--work` keeps the generated data: a
rerun with the same folder reuses it. `--only TEXT` runs the checks whose name contains
TEXT (and the preflight).

`--dry` runs the same checks on the CPU with small data: DALI CPU against DALI CPU (exact)
and against the torch path, so the script itself is tested on machines without a GPU
(tests/bench/test_gpu_check.py). A check that does not apply says "skip". Exit status 1
when a check failed, 3 when the deadline stopped the run. Results go to DIR (default: $OUT,
else ./gpu_check_out). See docs/gpu.md.
"""
from __future__ import annotations

import argparse
import ctypes.util
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gpu_report import EXIT_DEADLINE, EXIT_FAILED, Deadline, Report, Watchdog  # noqa: E402
from dali_pipes.cli import ArgumentParser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]  # the checkout, where the subprocesses run
THROUGHPUT_S = 90.0  # seconds the gpu-marked tests leave for the throughput checks


def checks(ctx) -> list[tuple[str, object]]:
    """(name, zero-argument callable) for every check, in run order: correctness first,
    throughput last."""
    from bench import gpu_checks as mc  # torch and DALI: after --help
    from bench import gpu_checks_device as dc
    from bench import gpu_checks_hw as hw
    out = [(f"image preset={p} train={t}", lambda p=p, t=t: mc.image_preset(ctx, p, t))
           for p in mc.PRESETS for t in (True, False)]
    out += [(f"image preset={p}: DALI vs the torch path",
             lambda p=p: mc.image_torch_path(ctx, p)) for p in ("default", "exact")]
    out += [("hyperspectral normalize=False", lambda: mc.hyperspectral(ctx, False)),
            ("hyperspectral normalize=True", lambda: mc.hyperspectral(ctx, True)),
            ("band statistics + PCA on the device's array module", lambda: mc.band_math(ctx))]
    for pad in ("repeat_last", "variable"):
        out += [(f"video VP9 pad={pad}", lambda pad=pad: mc.video(ctx, pad)),
                (f"frame folders pad={pad}", lambda pad=pad: mc.frame_folders(ctx, pad)),
                (f"fusion pad={pad}", lambda pad=pad: mc.fusion_clips(ctx, pad))]
    out += [("image recipe timm-rand-m9", lambda: mc.image_recipe(ctx, "timm-rand-m9")),
            ("image hue, grayscale, blur, autoaugment", lambda: mc.image_photometric(ctx)),
            ("image dtypes with channels_last", lambda: mc.image_outputs(ctx)),
            ("image large photos", lambda: mc.image_large_photos(ctx)),
            ("image alpha='keep', adjust_orientation", lambda: mc.image_alpha(ctx)),
            ("detection train, masks", lambda: mc.detection(ctx, True)),
            ("detection eval, masks", lambda: mc.detection(ctx, False)),
            ("video short-side crops", lambda: mc.video_crops(ctx, False)),
            ("video multi-view eval", lambda: mc.video_crops(ctx, True)),
            ("video H.264", lambda: mc.video_h264(ctx)),
            ("clips NVDEC cannot take are routed, not blamed",
             lambda: mc.small_and_unsupported_clips(ctx)),
            ("decoder of each clip (NVDEC, not PyAV)", lambda: hw.decoders(ctx)),
            ("NVJPG for full-image and ROI decoding", lambda: hw.jpeg_engine(ctx)),
            ("feed / graph / hand-over ms, GPU and CPU use", lambda: hw.stages(ctx)),
            ("next() with a busy training stream", lambda: hw.busy_stream(ctx)),
            ("held batches unchanged across epochs", lambda: dc.buffer_reuse(ctx)),
            ("busy consumer stream and side stream", lambda: dc.streams(ctx)),
            ("resume from state_dict", lambda: dc.resume(ctx)),
            ("adapter dali_from_dataset", lambda: dc.adapter(ctx)),
            ("LOCAL_RANK=1 with one visible GPU", lambda: dc.local_rank(ctx)),
            ("NVML handle is the CUDA device's", lambda: dc.nvml_mapping(ctx)),
            ("pytest -m gpu (other gpu-marked tests)", lambda: pytest_gpu(ctx)),
            ("throughput: images/s and clips/s", lambda: dc.throughput(ctx)),
            ("compare.py images, JPEG engine used", lambda: dc.compare_cuda(ctx))]
    return out


def preflight(dry: bool) -> dict:
    """The driver (nvidia-smi), NVDEC's library (libnvcuvid) and the imports the run needs;
    raises at the first thing missing (on --dry only the imports are required)."""
    found: dict = {}
    for module in ("torch", "nvidia.dali", "cupy"):
        if module == "cupy" and dry:
            continue
        try:
            found[module] = importlib.import_module(module).__version__
        except Exception as exc:
            raise RuntimeError(f"preflight: import {module} failed: {exc!r}; "
                               f"PYTHONPATH={os.environ.get('PYTHONPATH')}") from exc
    if dry:
        return {**found, "driver": "not checked (--dry)"}
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise RuntimeError("preflight: nvidia-smi not found: no driver")
    run = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise RuntimeError(f"preflight: nvidia-smi failed: {run.stderr.strip()[-400:]}")
    found["gpu, driver"] = run.stdout.strip()
    try:
        ctypes.CDLL("libnvcuvid.so.1")
    except OSError as exc:
        raise RuntimeError(f"preflight: libnvcuvid.so.1 (NVDEC) not loadable: {exc}; every "
                           f"clip would go to PyAV") from exc
    found["libnvcuvid"] = ctypes.util.find_library("nvcuvid") or "libnvcuvid.so.1"
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("preflight: torch sees no GPU")
    return found


def has_gpu() -> bool:
    """Whether torch sees a CUDA device (False, not an exception, without a driver)."""
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a torch that does not import has no GPU to check
        return False


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


def environment(ctx) -> dict:
    dry = not ctx.gpu
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
    doctor = subprocess.run([sys.executable, "-m", "torch_bridge.tools.doctor", "--json"],
                            capture_output=True, text=True, timeout=ctx.timeout(120), cwd=ROOT)
    try:
        env["doctor"] = [{k: c[k] for k in ("name", "status", "detail")}
                         for c in json.loads(doctor.stdout)["checks"]]
    except (ValueError, KeyError):
        env["doctor"] = f"doctor failed: {doctor.stderr[-800:]}"
    return env


def pytest_gpu(ctx) -> dict:
    if not ctx.gpu:
        raise RuntimeError("skip: the dry run has no GPU for the gpu-marked tests")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                          "-m", "gpu", "--ignore=tests/gpu", "tests"], capture_output=True,
                         text=True, timeout=ctx.timeout(150, keep=THROUGHPUT_S), cwd=ROOT)
    tail = run.stdout.strip().splitlines()[-15:]
    assert run.returncode in (0, 5), "\n".join(tail)  # 5: none collected
    return {"summary": tail[-1] if tail else ""}


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry", action="store_true", help="CPU only, small data")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT",
                                                                         "gpu_check_out")))
    parser.add_argument("--work", type=Path, help="data folder (default: a temporary one)")
    parser.add_argument("--deadline", type=float, default=540.0,
                        help="seconds the whole run may take (default 540)")
    parser.add_argument("--only", help="run only the checks whose name contains this")
    args = parser.parse_args(argv)
    if not args.dry and not has_gpu():
        print("gpu_check.py: no NVIDIA GPU here (no driver, or torch sees no CUDA device); "
              "`python bench/gpu_check.py --dry` runs the same checks on the CPU",
              file=sys.stderr)
        return 2
    from bench import gpu_checks as mc
    deadline = Deadline(args.deadline)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu_check_"))
    work.mkdir(parents=True, exist_ok=True)
    ctx = mc.dry_ctx(work) if args.dry else mc.Ctx("cuda", work)
    ctx.deadline = deadline
    if ctx.gpu:
        import torch
        torch.cuda.set_device(0)  # the loaders' device: contexts on it alone
    todo = [("preflight", lambda: preflight(args.dry)), ("environment and doctor",
                                                        lambda: environment(ctx))]
    todo += [c for c in checks(ctx) if args.only is None or args.only in c[0]]
    report = Report(args.out, device=ctx.device, dry=args.dry, planned=[n for n, _ in todo])
    with Watchdog(report, deadline):
        run_all(todo, report, deadline)
    print(report.text())
    return EXIT_FAILED if report.summary()["failed"] else \
        EXIT_DEADLINE if report.summary()["not_run"] else 0


def run_all(todo: list, report: Report, deadline: Deadline, min_left: float = 5.0) -> None:
    """Each check in turn, the report rewritten after each; a failed preflight, or fewer
    than `min_left` seconds left, marks the rest not run."""
    for name, fn in todo:
        if deadline.left() < min_left:
            report.not_run(f"{deadline.left():.0f} s left before the deadline")
            return
        report.start(name)
        record = run_one(name, fn)
        report.add(record)
        if name == "preflight" and record["status"] == "fail":
            report.not_run("the preflight failed")
            return


if __name__ == "__main__":
    sys.exit(main())
