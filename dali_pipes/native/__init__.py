"""Native DALI operators of dali_pipes: C++ sources in this folder, compiled on first use
against the installed DALI (its headers and libdali.so) into a per-user cache, then loaded
with `nvidia.dali.plugin_manager.load_library`.

`library(name)` returns the loaded library's path, or None where it cannot be had (no C++
compiler, no CUDA headers, a failed build, or DALI_PIPES_NATIVE=0); `why_not(name)` then
says why. Callers keep a graph of DALI's own operators for that case, so a missing compiler
costs speed (and the exact agreement with torchvision, docs/native_ops.md), never a failed
loader. The first build prints one line; later processes load the cached file. The cache
key is the source, the DALI version, the compiler and its flags, so a new DALI or an edited
source builds anew.

Environment: DALI_PIPES_NATIVE=0 turns native operators off; DALI_PIPES_CACHE sets the
cache folder (its "native" subfolder; default ~/.cache/dali-pipes, where the sample data
sets also live); CXX the compiler (default g++ or c++);
CUDA_HOME where CUDA's headers are (DALI's headers include cuda_runtime_api.h).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SOURCES = Path(__file__).resolve().parent
# the libraries (sources NAME.cc) the graphs may ask for
OPERATORS = ("resize_op", "policy_op", "photometric_op")
BUILD_TIMEOUT_S = 300
_FLAGS = ("-std=c++20", "-O3", "-fPIC", "-shared", "-ffp-contract=off")

_lock = threading.Lock()
_loaded: dict[str, str | None] = {}
_reasons: dict[str, str] = {}


def enabled() -> bool:
    """False where DALI_PIPES_NATIVE is 0 / false / no / off."""
    return os.environ.get("DALI_PIPES_NATIVE", "1").strip().lower() not in (
        "0", "false", "no", "off")


def cache_dir() -> Path:
    """$DALI_PIPES_CACHE/native, or ~/.cache/dali-pipes/native (beside the sample data)."""
    root = os.environ.get("DALI_PIPES_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dali-pipes")
    return Path(root) / "native"


def _compiler() -> str | None:
    for cand in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


_CUDA_HEADERS = ("cuda_runtime_api.h", "crt/host_config.h", "nv/target")


def _cuda_include() -> str | None:
    """A CUDA toolkit's include folder (CUDA_HOME, CUDA_PATH or /usr/local/cuda) with the
    headers DALI's include: the runtime's, crt/ and nv/ (a pip CUDA runtime alone lacks
    the last two)."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        inc = os.path.join(root, "include") if root else ""
        if inc and all(os.path.isfile(os.path.join(inc, h)) for h in _CUDA_HEADERS):
            return inc
    return None


def _cpu_flags() -> tuple[str, ...]:
    """-mfma and -mavx2 where the CPU has them: the operators use fused multiply-adds where
    torch's vectorised kernels do (without it each is a library call), and the resize's
    row passes vectorise 8 floats wide."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return ()
    return tuple(f"-m{f}" for f in ("fma", "avx2") if f in flags)


def _options(cxx: str, cuda_inc: str) -> list[str]:
    """The compiler and every option but the source and the output."""
    import nvidia.dali.sysconfig as sysconfig

    return [cxx, *_FLAGS, *_cpu_flags(), *sysconfig.get_compile_flags(), f"-I{cuda_inc}",
            *sysconfig.get_link_flags()]


def _key(src: Path, options: list[str]) -> str:
    """The cache key: the source, the DALI version, the compiler and its options."""
    import nvidia.dali as dali

    h = hashlib.sha256(src.read_bytes())
    h.update(dali.__version__.encode())
    h.update("\0".join(options).encode())
    return h.hexdigest()[:16]


def _build(name: str, rebuild: bool = False) -> str:
    """The cached library's path, compiling it first if needed (or if `rebuild`);
    RuntimeError saying why not."""
    src = SOURCES / f"{name}.cc"
    if not src.is_file():
        raise RuntimeError(f"no source {src}")
    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler (set CXX, or install g++)")
    cuda_inc = _cuda_include()
    if cuda_inc is None:
        raise RuntimeError("no CUDA toolkit headers (cuda_runtime_api.h, crt/, nv/ under "
                           "CUDA_HOME/include or /usr/local/cuda/include)")
    options = _options(cxx, cuda_inc)
    key = _key(src, options)
    folder = cache_dir() / key
    lib = folder / f"lib{name}.so"
    if lib.is_file() and not rebuild:
        return str(lib)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a read-only home, say: this user's temporary folder instead
        folder = Path(tempfile.gettempdir()) / f"dali-pipes-native-{os.getuid()}" / key
        print(f"dali_pipes: cannot write {cache_dir()} ({e.strerror}); building in {folder}",
              file=sys.stderr)
        lib = folder / f"lib{name}.so"
        if lib.is_file() and not rebuild:
            return str(lib)
        folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".lib{name}.", suffix=".so", dir=folder)
    os.close(fd)
    print(f"dali_pipes: building native operator {name} (once; {lib})", file=sys.stderr)
    try:
        done = subprocess.run([*options[:1], str(src), *options[1:], "-o", tmp],
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"{cxx} failed (exit {done.returncode}) on {src}:\n{tail}")
        os.replace(tmp, lib)  # atomic: concurrent builders each write their own temp file
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"building {src} took over {BUILD_TIMEOUT_S} s") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(lib)


def _build_and_load(name: str) -> str:
    import nvidia.dali.plugin_manager as plugin_manager

    path = _build(name)
    try:
        plugin_manager.load_library(path)
    except Exception:  # a damaged cached file (a full disk, say): build it anew, once
        path = _build(name, rebuild=True)
        plugin_manager.load_library(path)
    return path


def library(name: str) -> str | None:
    """Path of the loaded native library `name` (e.g. "policy_op"), or None (see why_not)."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
        path: str | None = None
        if not enabled():
            _reasons[name] = "DALI_PIPES_NATIVE is off"
        else:
            try:
                path = _build_and_load(name)
            except Exception as e:  # any failure falls back to DALI's own operators
                _reasons[name] = f"{type(e).__name__}: {e}"
                print(f"dali_pipes: native operator {name} unavailable, using DALI's own "
                      f"operators instead ({_reasons[name].splitlines()[0]})", file=sys.stderr)
                path = None
        _loaded[name] = path
        return path


def wanted(name: str, fused: bool | None, what: str) -> bool:
    """Whether a graph step uses library `name` (a fused operator, described as `what` in
    errors): never with `fused` False; with None where it loads; with True it must load,
    else RuntimeError saying why."""
    if fused is False:
        return False
    if library(name) is not None:
        return True
    if fused:
        raise RuntimeError(f"the fused {what} is unavailable: {why_not(name)}")
    return False


def why_not(name: str) -> str | None:
    """Why `library(name)` gave None (None if it was loaded or not asked for yet)."""
    return _reasons.get(name)
