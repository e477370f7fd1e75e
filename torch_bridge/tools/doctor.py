"""`python -m torch_bridge.doctor [--json]`: the environment a data pipeline depends on.

Probes (impure, never raising) collect an `Env`: each compiled companion of torch
(torchvision, DALI, the native operators) is imported and run, so a mismatched build is
named with the command that fixes it; pure check functions turn values into
`Check(name, status, detail, advice)` rows, whose advice depends on whether the machine has
a GPU; the exit code is 1 only when a check fails. `environment_problem()` is the quick
check a program runs before it measures anything: the first of torch, torchvision and DALI
that does not import and run here, as a failed row, or None.
Driver minimums are NVIDIA's for CUDA minor-version compatibility (CUDA release notes):
a CUDA X.y build needs a driver whose supported CUDA version (NVML / nvidia-smi) is >= X.0.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import sys
from dataclasses import dataclass, field

from dali_pipes.cli import ArgumentParser
from torch_bridge.tools._check_row import Check, major
from torch_bridge.tools._companions import (
    Imported,
    check_dali,
    check_torch,
    check_torchvision,
    first_line,
    gpu_present,
    requirements,
    try_import,
)
from torch_bridge.tools._companions import (  # the quick check, public here
    environment_problem as environment_problem,
)
from torch_bridge.tools._doctor_gpu import cuda_major_checks, gpu_checks, probe_gpu

GiB = 1 << 30
MIN_SHM = GiB
# Minimum Linux driver for minor-version compatibility within each CUDA major, checked
# against NVIDIA's "CUDA Compatibility: Minor Version Compatibility" table (13.x >= 580,
# 12.x >= 525, 11.x >= 450; 11.x needs 450.80.02) and the x.0 toolkit release notes.
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
DEFAULT_BATCH_BYTES = 64 * 3 * 224 * 224 * 4  # 64 float32 images of 224x224
PREFETCH = 2  # DataLoader's default prefetch_factor


@dataclass
class Env:
    """Everything the checks look at; None means "could not be found out" (see *_error)."""

    python: str = platform.python_version()
    system: str = platform.system()
    torch_version: str | None = None
    torch_error: str | None = None  # why `import torch` failed
    torch_cuda: str | None = None  # torch.version.cuda: None for a CPU-only build
    cudnn: int | None = None
    cuda_available: bool = False
    cuda_error: str | None = None
    driver_version: str | None = None
    driver_cuda: str | None = None  # highest CUDA version the driver supports, "12.4"
    gpus: list[str] = field(default_factory=list)
    nvml_error: str | None = None
    gpu_present: bool = False  # an NVIDIA GPU with its driver (NVML, or the driver's files)
    torchvision_version: str | None = None
    torchvision_error: str | None = None  # why import or torchvision.ops.nms failed
    torchvision_requires: list[str] | None = None  # its metadata's Requires-Dist
    dali_version: str | None = None
    dali_error: str | None = None
    dali_cuda: int | None = None  # CUDA major of the DALI build
    cupy_version: str | None = None
    cupy_cuda: int | None = None
    cupy_devices: int | None = None
    cupy_error: str | None = None
    pin_error: str | None = None  # None: pinned memory allocated fine
    gpu: dict | None = None  # doctor_gpu.probe_gpu's result; None: not probed (no GPU)
    shm_total: int | None = None
    shm_free: int | None = None
    cpu_count: int | None = os.cpu_count()
    usable_cores: int | None = None
    # dali_pipes' native CPU operators: name -> None (built and loaded) or why not
    native: dict[str, str | None] = field(default_factory=dict)


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


# --- pure checks --------------------------------------------------------------------------
def check_cuda(available: bool, error: str | None, gpus: list[str]) -> Check:
    if available:
        return Check("cuda", "ok", f"available, {len(gpus) or '?'} device(s)")
    return Check("cuda", "info", f"not available: {error or 'no device'}",
                 "the CPU backend will be used (device='cpu'); DALI runs its CPU graph")


def check_driver(driver: str | None, driver_cuda: str | None, gpus: list[str],
                 error: str | None) -> Check:
    if driver is None:
        return Check("driver", "info", f"no NVIDIA driver ({error or 'NVML not found'})",
                     "no GPU: the CPU backend will be used")
    names = ", ".join(gpus) or "no GPU listed"
    return Check("driver", "ok", f"{driver} (supports CUDA {driver_cuda}); GPUs: {names}")


def check_driver_supports(what: str, build_cuda: str | int | None, driver: str | None,
                          driver_cuda: str | None) -> Check:
    """A CUDA X build needs a driver supporting CUDA >= X.0 (minor-version compatibility)."""
    name = f"driver vs {what}"
    built, driver_major = major(build_cuda), major(driver_cuda)
    if built is None or driver is None or driver_major is None:
        return Check(name, "info", f"{what} CUDA {build_cuda}; driver not present, not compared")
    if driver_major < built:
        need = MIN_DRIVER.get(built, f"one supporting CUDA {built}.0")
        return Check(name, "fail", f"{what} is built for CUDA {build_cuda} but driver {driver} "
                     f"supports only CUDA {driver_cuda}",
                     f"upgrade the NVIDIA driver to >= {need}, or install a {what} build "
                     f"for CUDA {driver_major}")
    return Check(name, "ok", f"driver {driver} (CUDA {driver_cuda}) runs {what} CUDA "
                 f"{build_cuda}")


def check_cuda_majors(torch_cuda: str | None, dali_cuda: int | None,
                      driver_cuda: str | None) -> Check:
    t, d = major(torch_cuda), major(dali_cuda)
    if t is None or d is None or t == d:
        return Check("torch/DALI CUDA", "ok", f"torch CUDA {torch_cuda}, DALI CUDA {dali_cuda}")
    detail = f"torch is built for CUDA {t}, DALI for CUDA {d}"
    need = max(t, d)
    advice = (f"each wheel bundles its own CUDA runtime, so this works when the driver "
              f"supports CUDA {need} (Linux driver >= {MIN_DRIVER.get(need, '?')}); "
              f"a driver for CUDA {min(t, d)} only would break the CUDA {need} side")
    driver_major = major(driver_cuda)
    if driver_major is not None and driver_major < need:
        return Check("torch/DALI CUDA", "warn", f"{detail}; driver supports CUDA {driver_cuda}",
                     advice)
    return Check("torch/DALI CUDA", "info", detail, advice)


def check_cupy(version: str | None, cuda: int | None, devices: int | None,
               error: str | None) -> Check:
    if version is None:
        return Check("cupy", "info", "not installed (optional)")
    if devices:
        return Check("cupy", "ok", f"{version} (CUDA {cuda}), {devices} device(s)")
    return Check("cupy", "info", f"{version} (CUDA {cuda}), no device: {error or 'none found'}")


def check_pinned(error: str | None, cuda_available: bool) -> Check:
    if error is None:
        return Check("pinned memory", "ok", "torch.empty(..., pin_memory=True) works")
    if not cuda_available:
        return Check("pinned memory", "info", f"unavailable without CUDA: {error}",
                     "pin_memory only speeds up host-to-GPU copies; not needed on CPU")
    return Check("pinned memory", "fail", f"allocation failed: {error}",
                 "check ulimit -l (locked memory) and the container's memory limits")


def check_shm(total: int | None, free: int | None, need: int) -> Check:
    if total is None or free is None:
        return Check("/dev/shm", "warn", "not found", "DataLoader workers pass batches "
                     "through shared memory; mount /dev/shm (docker: --shm-size=8g)")
    detail = f"{total / GiB:.1f} GiB, {free / GiB:.1f} GiB free; workers need ~{need / GiB:.2f} GiB"
    if total < MIN_SHM or free < need:
        return Check("/dev/shm", "warn", detail, "enlarge /dev/shm (docker: --shm-size=8g, "
                     "--ipc=host) or use fewer workers / smaller batches")
    return Check("/dev/shm", "ok", detail)


def check_cores(usable: int | None, total: int | None) -> Check:
    detail = f"{usable} usable of {total}"
    if usable is None:
        return Check("cpu cores", "info", f"{total} (affinity unknown)")
    from torch_bridge.engines.reference import ReferenceOptions
    default = ReferenceOptions.num_workers
    low, high = max(default, usable // 2), max(default, usable * 3 // 4)
    workers = (f"the torch backend's DataLoader starts {default} workers; with these cores "
               f"try reference={{'num_workers': {low if low == high else f'{low}-{high}'}}}")
    if usable < 4:
        return Check("cpu cores", "warn", detail, f"few cores: decoding on CPU will be slow; "
                     f"{workers}")
    if total and usable < total:
        return Check("cpu cores", "info", detail + " (CPU affinity / cgroup limit)", workers)
    return Check("cpu cores", "ok", detail, workers)


def check_native(native: dict[str, str | None]) -> Check:
    if not native:
        return Check("native operators", "info", "not probed (DALI is not importable)")
    missing = {name: why for name, why in native.items() if why is not None}
    if not missing:
        return Check("native operators", "ok", f"{', '.join(native)} built and loaded")
    reasons = "; ".join(f"{name}: {why.splitlines()[0]}" for name, why in missing.items())
    return Check("native operators", "warn", reasons,
                 "DALI's own (slower) CPU operators run instead: install g++ and a CUDA "
                 "toolkit's headers (CUDA_HOME), or unset DALI_PIPES_NATIVE=0 "
                 "(docs/native_ops.md)")


def run_checks(env: Env, *, batch_bytes: int = DEFAULT_BATCH_BYTES,
               workers: int | None = None) -> list[Check]:
    workers = workers if workers is not None else max(1, (env.usable_cores or 1) // 2)
    return [
        Check("python", "ok", f"{env.python} on {env.system}",
              "" if env.system == "Linux" else "workers use spawn here: startup is slower"),
        check_torch(env.torch_version, env.torch_cuda, env.cudnn, gpu=env.gpu_present,
                    error=env.torch_error, torchvision=env.torchvision_version,
                    requires=env.torchvision_requires),
        check_torchvision(_torchvision(env), env.torch_version, env.torchvision_requires,
                          gpu=env.gpu_present),
        check_cuda(env.cuda_available, env.cuda_error, env.gpus),
        check_driver(env.driver_version, env.driver_cuda, env.gpus, env.nvml_error),
        check_driver_supports("torch", env.torch_cuda, env.driver_version, env.driver_cuda),
        check_driver_supports("DALI", env.dali_cuda, env.driver_version, env.driver_cuda),
        check_cuda_majors(env.torch_cuda, env.dali_cuda, env.driver_cuda),
        check_dali(env.dali_version, env.dali_cuda, env.dali_error),
        check_cupy(env.cupy_version, env.cupy_cuda, env.cupy_devices, env.cupy_error),
        *cuda_major_checks(env.torch_cuda, env.dali_cuda, env.cupy_cuda),
        check_pinned(env.pin_error, env.cuda_available),
        check_shm(env.shm_total, env.shm_free, batch_bytes * workers * PREFETCH),
        check_cores(env.usable_cores, env.cpu_count),
        check_native(env.native),
        *gpu_checks(env.gpu, env.cuda_error if not env.cuda_available else None),
    ]


# --- probes (impure; each records a failure instead of raising) ---------------------------
def _torchvision(env: Env) -> Imported:
    return Imported("torchvision", env.torchvision_version, env.torchvision_error)


def _first_line(exc: BaseException) -> str:
    """The exception type and its first sentence (driver errors go on with a URL)."""
    return first_line(exc).split(". ")[0]


def _probe_torch(env: Env) -> None:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken build's error
        env.torch_error = first_line(exc)
        return
    env.torch_version, env.torch_cuda = torch.__version__, torch.version.cuda
    env.cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    env.cuda_available = torch.cuda.is_available()
    if not env.cuda_available:
        env.cuda_error = "CPU-only torch build" if env.torch_cuda is None else None
        try:
            torch.cuda.init()
        except Exception as exc:  # noqa: BLE001 - any failure is the answer we report
            env.cuda_error = env.cuda_error or _first_line(exc)
    try:
        torch.empty(16, pin_memory=True)
    except Exception as exc:  # noqa: BLE001
        env.pin_error = _first_line(exc)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _probe_nvml(env: Env) -> None:
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - ImportError or NVMLError: no driver
        env.nvml_error = _first_line(exc)
        return
    try:
        env.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        code = pynvml.nvmlSystemGetCudaDriverVersion()
        env.driver_cuda = f"{code // 1000}.{code % 1000 // 10}"
        env.gpus = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
                    for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as exc:  # noqa: BLE001
        env.nvml_error = _first_line(exc)
    finally:
        pynvml.nvmlShutdown()


def _dali_cuda_from_wheel(prefix: str = "nvidia-dali-cuda") -> int | None:
    """CUDA major from an installed wheel's name: nvidia-dali-cuda130 -> 13,
    cupy-cuda12x -> 12."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(prefix):
            digits = name.removeprefix(prefix).rstrip("x")
            return int(digits[:2]) if digits[:2].isdigit() else None
    return None


def _probe_torchvision(env: Env) -> None:
    found = try_import("torchvision")
    env.torchvision_version, env.torchvision_error = found.version, found.error
    env.torchvision_requires = requirements("torchvision") if found.version else None


def _probe_dali(env: Env) -> None:
    try:
        import nvidia.dali as dali
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken build's error
        env.dali_error = first_line(exc)
        return
    env.dali_version = dali.__version__
    code = getattr(dali, "__cuda_version__", None)  # e.g. 12986 for 12.9.86
    env.dali_cuda = int(str(code)[:2]) if code else _dali_cuda_from_wheel()
    try:
        from dali_pipes import native
        env.native = {name: (None if native.library(name) else native.why_not(name))
                      for name in native.OPERATORS}
    except Exception as exc:  # noqa: BLE001 - a probe records, never raises
        env.native = {"native": _first_line(exc)}


def _probe_cupy(env: Env) -> None:
    try:
        import cupy
    except ImportError:
        return
    env.cupy_version = cupy.__version__
    env.cupy_cuda = _dali_cuda_from_wheel("cupy-cuda")  # the build's major, without a driver
    try:
        env.cupy_cuda = cupy.cuda.runtime.runtimeGetVersion() // 1000
        env.cupy_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError without a driver
        env.cupy_error = _first_line(exc)


def probe() -> Env:
    env = Env()
    for step in (_probe_torch, _probe_torchvision, _probe_nvml, _probe_dali, _probe_cupy):
        step(env)
    env.gpu_present = bool(env.gpus) or env.driver_version is not None or gpu_present()
    try:
        stat = os.statvfs("/dev/shm")
        env.shm_total, env.shm_free = stat.f_frsize * stat.f_blocks, stat.f_frsize * stat.f_bavail
    except OSError:
        pass
    if hasattr(os, "sched_getaffinity"):
        env.usable_cores = len(os.sched_getaffinity(0))
    if env.cuda_available:
        import torch
        env.gpu = probe_gpu(torch.cuda.current_device())
    return env


# --- output -------------------------------------------------------------------------------
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "cyan"}


def _print_table(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    table = Table(title="torch_bridge doctor")
    for column in ("check", "status", "detail", "advice"):
        table.add_column(column, overflow="fold")
    for c in checks:
        table.add_row(escape(c.name), f"[{_STYLE[c.status]}]{c.status}[/]", escape(c.detail),
                      escape(c.advice))  # advice holds pip extras: "[cu13]" is no markup
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m torch_bridge.doctor", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES,
                        help="bytes of one batch, to size /dev/shm (default: 64x3x224x224 f32)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader workers you plan to use (default: half the cores)")
    args = parser.parse_args(argv)
    env = probe()
    checks = run_checks(env, batch_bytes=args.batch_bytes, workers=args.workers)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [dataclasses.asdict(c) for c in checks],
                          "env": dataclasses.asdict(env)}, indent=2))
    else:
        _print_table(checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
