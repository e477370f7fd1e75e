"""Native DALI operators of dali_pipes: C++ sources in this folder, compiled on first use
against the installed DALI (its headers and libdali.so) into a per-user cache, then loaded
with `nvidia.dali.plugin_manager.load_library`.

`library(name)` returns the loaded library's path, or None where it cannot be had (no C++
compiler, no CUDA headers, a failed build, or DALI_PIPES_NATIVE=0); `why_not(name)` then
says why. Callers keep a graph of DALI's own operators for that case, so a missing compiler
costs speed (and the exact agreement with torchvision, docs/native_ops.md), never a failed
loader. The first build prints one line; later processes load the cached file once it
matches the size, sha256 and key recorded beside it and both files, and the folders on the
way, are this user's alone (`builder`, `folders`, `trust`). The cache key is the source, the
shared header dp_op.h, the DALI version, the compiler and its flags, so a new DALI or an
edited source builds anew.

Environment: DALI_PIPES_NATIVE=0 turns native operators off; DALI_PIPES_CACHE sets the
cache folder (its "native" subfolder; default ~/.cache/dali-pipes, where the sample data
sets also live); DALI_PIPES_CXX (else CXX) the compiler (default g++ or c++);
DALI_PIPES_BUILD_TIMEOUT the seconds a build may take (default 120); CUDA_HOME where CUDA's
headers are (DALI's headers include cuda_runtime_api.h).
"""
from __future__ import annotations

import os
import sys
import threading

from dali_pipes.native.builder import SOURCES, BuildSkipped, build, cache_dir

# the libraries (sources NAME.cc) the graphs may ask for
OPERATORS = ("resize_op", "policy_op", "photometric_op", "decode_crop_op")

def _run_as_is(fn):
    """`fn` marked for DALI's AutoGraph as code to run as it is: graphs with conditionals
    ask for their operators while they are traced, and the build's file checks and loops
    are no graph code (converted, they broke the build)."""
    try:
        from nvidia.dali.pipeline import do_not_convert
    except ImportError:  # no DALI: nothing traces
        return fn
    return do_not_convert(fn)


_lock = threading.Lock()
_loaded: dict[str, str | None] = {}
_reasons: dict[str, str] = {}


def enabled() -> bool:
    """False where DALI_PIPES_NATIVE is 0 / false / no / off."""
    return os.environ.get("DALI_PIPES_NATIVE", "1").strip().lower() not in (
        "0", "false", "no", "off")


def _build_and_load(name: str) -> str:
    import nvidia.dali.plugin_manager as plugin_manager

    path = build(name)
    try:
        plugin_manager.load_library(path)
    except Exception:  # a verified file that still does not load: build it anew, once
        path = build(name, rebuild=True)
        plugin_manager.load_library(path)
    return path


@_run_as_is
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
                if not isinstance(e, BuildSkipped):  # that one was said once, at the timeout
                    print(f"dali_pipes: native operator {name} unavailable, using DALI's own "
                          f"operators instead ({_reasons[name].splitlines()[0]})",
                          file=sys.stderr)
                path = None
        _loaded[name] = path
        return path


@_run_as_is
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


__all__ = ["OPERATORS", "SOURCES", "build", "cache_dir", "enabled", "library", "wanted",
           "why_not"]
