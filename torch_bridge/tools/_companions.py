"""torch's compiled companions (torchvision, DALI): whether they import and run here, and
the pip command that installs a working pair (used by the doctor and by bench/compare.py).

torch and torchvision are released in pairs (torchvision 0.X.Y is built for torch
2.(X-15).Y since torch 2.1), and each wheel is built for one CUDA version or for the CPU:
a CPU torch beside a CUDA torchvision (or the other way round) fails on `import
torchvision` with "operator torchvision::nms does not exist". The pair torchvision needs
is read from its metadata (`Requires-Dist: torch==...`), else from that rule.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

from torch_bridge.tools._check_row import Check

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_PINNED = re.compile(r"^torch\s*\(?\s*==\s*([0-9][0-9A-Za-z.]*)")


@dataclass(frozen=True)
class Imported:
    """One package's import: its version (from its metadata when the import fails) and the
    error that stopped it, as "Type: first line" (None: it imports and runs)."""

    name: str
    version: str | None
    error: str | None


def first_line(exc: BaseException) -> str:
    """The exception's type and first line ("RuntimeError: operator ... does not exist")."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


def gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU with its driver loaded (without CUDA)."""
    return Path("/proc/driver/nvidia/version").exists() or any(Path("/dev").glob("nvidia[0-9]*"))


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def public(version: str | None) -> str | None:
    """The version without its local build tag: "2.5.1+cpu" -> "2.5.1"."""
    return None if version is None else version.split("+")[0]


def build_tag(version: str | None) -> str | None:
    """The local build tag: "2.5.1+cpu" -> "cpu", "0.20.1+cu124" -> "cu124", else None."""
    return None if version is None or "+" not in version else version.split("+", 1)[1]


def torch_for(torchvision: str, requires: list[str] | None = None) -> str | None:
    """The torch version `torchvision` is built for: its `torch==` requirement, else the
    release rule (0.X.Y -> 2.(X-15).Y); None when neither applies."""
    for requirement in requires or ():
        match = _PINNED.match(requirement)
        if match:
            return public(match.group(1))
    parts = (public(torchvision) or "").split(".")
    if len(parts) >= 3 and parts[0] == "0" and parts[1].isdigit() and int(parts[1]) >= 16:
        return f"2.{int(parts[1]) - 15}.{parts[2]}"
    return None


def torchvision_for(torch: str) -> str | None:
    """The torchvision release built for `torch` (2.Y.Z -> 0.(Y+15).Z), None when unknown."""
    parts = (public(torch) or "").split(".")
    if len(parts) >= 3 and parts[0] == "2" and parts[1].isdigit() and int(parts[1]) >= 1:
        return f"0.{int(parts[1]) + 15}.{parts[2]}"
    return None


def install_command(torch: str | None, torchvision: str | None, requires: list[str] | None,
                    *, gpu: bool, cuda_tag: str | None = None) -> str:
    """The pip command installing a working torch + torchvision pair: the installed
    torchvision with the torch it names (`requires`: its metadata's requirements), else the
    installed torch with its torchvision.

    Args:
        torch: the installed torch's version (None: not installed).
        torchvision: the installed torchvision's version (None: not installed).
        requires: torchvision's `Requires-Dist` entries (None: unknown).
        gpu: whether the machine has a GPU (False: torch's CPU index).
        cuda_tag: the CUDA build wanted on a GPU ("cu130"); None: PyPI's default build.
    Returns:
        E.g. "pip install torch==2.5.1 torchvision==0.20.1 --index-url .../whl/cpu (where
        that index is unreachable: the same pair from PyPI, without --index-url)".
    """
    paired = torch_for(torchvision, requires) if torchvision else None
    pair: tuple[str | None, str | None] = (paired, public(torchvision)) if paired else \
        (public(torch), torchvision_for(torch) if torch else None)
    pins = " ".join(f"{name}=={v}" if v else name
                    for name, v in zip(("torch", "torchvision"), pair, strict=True))
    if not gpu:
        return (f"pip install {pins} --index-url {CPU_INDEX} (where that index is "
                f"unreachable: the same pair from PyPI, without --index-url)")
    if cuda_tag:
        return f"pip install {pins} --index-url https://download.pytorch.org/whl/{cuda_tag}"
    return f"pip install {pins}"


def requirements(name: str) -> list[str] | None:
    """The `Requires-Dist` entries of the installed distribution `name` (None: none)."""
    try:
        return importlib.metadata.requires(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def try_import(name: str) -> Imported:
    """Import `name` ("torch", "torchvision", "nvidia.dali") and, for torchvision, run one
    of its compiled operators; the version and the error, never raising."""
    dist = {"nvidia.dali": None}.get(name, name)
    try:
        module = importlib.import_module(name)
        if name == "torchvision":
            import torch
            module.ops.nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)
        return Imported(name, getattr(module, "__version__", None), None)
    except Exception as exc:  # noqa: BLE001 - what failed is the answer
        return Imported(name, _dist_version(dist) if dist else None, first_line(exc))


def _cuda_tag(*versions: str | None) -> str | None:
    """The first "cuNNN" build tag among `versions` (torch's, torchvision's)."""
    return next((t for v in versions if (t := build_tag(v)) and t.startswith("cu")), None)


def check_torch(version: str | None, cuda: str | None, cudnn: int | None, *, gpu: bool,
                error: str | None = None, torchvision: str | None = None,
                requires: list[str] | None = None) -> Check:
    """torch's row: whether it imports, and whether its build (CPU or CUDA) suits a machine
    with (`gpu`) or without a GPU; `torchvision` (its version) and `requires` (its
    requirements) complete the pip command."""
    fix = install_command(version, torchvision, requires, gpu=gpu,
                          cuda_tag=_cuda_tag(version))
    if version is None:
        return Check("torch", "fail", f"torch does not import: {error or 'not installed'}",
                     fix)
    if cuda is None and gpu:
        return Check("torch", "warn", f"{version}, a CPU-only build on a machine with a GPU",
                     "install a CUDA build to use the GPU (docs/gpu.md): "
                     + install_command(version, torchvision, None, gpu=True))
    if cuda is None:
        return Check("torch", "ok", f"{version}, a CPU-only build (no GPU here)")
    if not gpu:
        return Check("torch", "info", f"{version}, built for CUDA {cuda}, on a machine "
                     "without a GPU (it runs on the CPU)", "the CPU build leaves out about "
                     f"4 GB of CUDA libraries: {fix}")
    return Check("torch", "ok", f"{version}, built for CUDA {cuda}, cuDNN {cudnn}")


def _mismatch(torch: str | None, torchvision: str | None, want: str | None) -> str | None:
    """What differs between the installed torch and torchvision: the version torchvision
    is built for (`want`), or their kinds of build (CPU / CUDA); None when nothing does."""
    if want and torch and want != public(torch):
        return f"torchvision {torchvision} is built for torch {want}, torch is {torch}"
    tags = build_tag(torch), build_tag(torchvision)
    if all(tags) and (tags[0] == "cpu") != (tags[1] == "cpu"):
        return f"torch is a {tags[0]} build, torchvision {torchvision} a {tags[1]} build"
    return None


def check_torchvision(found: Imported, torch: str | None, requires: list[str] | None, *,
                      gpu: bool) -> Check:
    """torchvision's row: it imports and its compiled operators run, for the installed torch
    (version and CPU / CUDA build); else what differs and the pip command that fixes it."""
    fix = install_command(torch, found.version, requires, gpu=gpu,
                          cuda_tag=_cuda_tag(torch, found.version) if gpu else None)
    want = torch_for(found.version, requires) if found.version else None
    mismatch = _mismatch(torch, found.version, want)
    if found.error and found.version is None:
        return Check("torchvision", "fail", f"not installed ({found.error})", fix)
    if found.error:
        why = mismatch or ("torch does not import" if torch is None else
                           f"torch {torch} and torchvision {found.version} match by version: "
                           "one is a build for the CPU or another CUDA version, or damaged")
        return Check("torchvision", "fail", f"does not import: {found.error}; {why}", fix)
    if mismatch:
        return Check("torchvision", "warn", mismatch, fix)
    return Check("torchvision", "ok", f"{found.version}, its compiled operators run "
                 f"(torchvision.ops.nms)")


def check_dali(version: str | None, cuda: int | None, error: str | None = None) -> Check:
    """DALI's row: its version and CUDA build, or why it does not import and how to fix it."""
    if version is None:
        return Check("dali", "fail", f"nvidia.dali does not import: {error or 'not installed'}",
                     "pip install -e '.[cu13]' (beside a CUDA 13 or CPU torch) or "
                     "'.[cu12]' (CUDA 12)")
    return Check("dali", "ok", f"{version}, built for CUDA {cuda}")


def environment_problem() -> Check | None:
    """The first of torch, torchvision and DALI that does not import and run here, as a
    failed row naming the fix; None when they all do. Imports them (a benchmark's parent
    process checks this before it starts any measuring process)."""
    gpu = gpu_present()
    torch = try_import("torch")
    vision = try_import("torchvision") if torch.error is None else \
        Imported("torchvision", _dist_version("torchvision"), None)
    if torch.error is not None:
        return check_torch(None, None, None, gpu=gpu, error=torch.error,
                           torchvision=vision.version, requires=requirements("torchvision"))
    row = check_torchvision(vision, torch.version, requirements("torchvision"), gpu=gpu)
    if row.status == "fail":
        return row
    dali = try_import("nvidia.dali")
    return check_dali(None, None, dali.error) if dali.error is not None else None
