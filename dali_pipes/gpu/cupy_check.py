"""Whether CuPy really works on a CUDA device, proved once per device and process.

A CuPy wheel built for another CUDA major than the CUDA libraries present (cupy-cuda12x
beside torch's CUDA 13 wheels) imports and counts devices, then raises ImportError on the
first matmul or eigen-decomposition. `dali_pipes.geometry.bands.array_module` therefore
chooses CuPy only after `cupy_problem(index)` returned None; the doctor and
`bench/gpu_check.py` print the reason it gives otherwise. numpy only at import time (CuPy is
imported on first call).
"""
from __future__ import annotations

import functools

import numpy as np


@functools.cache
def cupy_problem(index: int) -> str | None:
    """None when CuPy works on CUDA device `index`, else why not.

    Args:
        index: the CUDA device number.
    Returns:
        None, or a one-line reason (not importable, no such device, a library that fails
        to load, results that differ from numpy's).
    """
    try:
        import cupy
    except ImportError as exc:
        return f"cupy is not importable ({exc})"
    return prove_cupy(cupy, index)


def prove_cupy(cupy, index: int) -> str | None:
    """A matmul (cuBLAS), `eigh` (cuSOLVER) and a NaN-aware reduction (an NVRTC-compiled
    kernel) on the module `cupy`, compared with numpy.

    Args:
        cupy: the cupy module (or an object with its interface).
        index: the CUDA device number.
    Returns:
        None when every step ran and matched numpy, else the reason.
    """
    a = np.arange(1.0, 17.0).reshape(4, 4)
    sym = a @ a.T + np.eye(4)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if index >= count:
            return f"CUDA device {index} requested but CuPy sees {count} device(s)"
        with cupy.cuda.Device(index):
            g = cupy.asarray(sym)
            w = cupy.asnumpy(cupy.linalg.eigh(g @ cupy.eye(4))[0])
            total = float(cupy.asnumpy(cupy.nansum(g, axis=0)).sum())
    except Exception as exc:  # noqa: BLE001 - ImportError of a CUDA library, CUDA errors
        return f"CuPy fails on cuda:{index}: {type(exc).__name__}: {exc}"
    if not (np.allclose(w, np.linalg.eigvalsh(sym)) and np.isclose(total, sym.sum())):
        return f"CuPy on cuda:{index} gives results that differ from numpy's"
    return None
