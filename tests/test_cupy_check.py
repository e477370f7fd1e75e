"""dali_pipes.gpu.cupy_check: CuPy is chosen only after it proved a matmul, eigh and a
reduction; a CuPy whose CUDA libraries fail to load gives numpy and a reason."""
from __future__ import annotations

import contextlib
import types

import numpy as np

from dali_pipes.geometry.bands import array_module
from dali_pipes.gpu import cupy_check


def fake_cupy(*, devices=1, eigh_error=None, wrong=False):
    """numpy dressed as cupy (a test double for the GPU library)."""
    def eigh(a):
        if eigh_error is not None:
            raise eigh_error
        w, v = np.linalg.eigh(a)
        return (w + 1 if wrong else w), v
    runtime = types.SimpleNamespace(getDeviceCount=lambda: devices)
    cuda = types.SimpleNamespace(runtime=runtime, Device=lambda i: contextlib.nullcontext())
    return types.SimpleNamespace(cuda=cuda, asarray=np.asarray, asnumpy=np.asarray,
                                 eye=np.eye, nansum=np.nansum,
                                 linalg=types.SimpleNamespace(eigh=eigh))


def test_a_working_cupy_passes():
    assert cupy_check.prove_cupy(fake_cupy(), 0) is None


def test_missing_math_library_is_the_reason():
    err = ImportError("libcusolver.so.11: cannot open shared object file")
    why = cupy_check.prove_cupy(fake_cupy(eigh_error=err), 0)
    assert "ImportError" in why and "libcusolver" in why


def test_device_count_and_wrong_results():
    assert "sees 1 device" in cupy_check.prove_cupy(fake_cupy(), 1)
    assert "differ" in cupy_check.prove_cupy(fake_cupy(wrong=True), 0)


def test_array_module_falls_back_to_numpy_when_the_proof_fails(monkeypatch):
    monkeypatch.setattr(cupy_check, "cupy_problem", lambda index: "no CUDA here")
    assert array_module("cuda") is np and array_module("cuda:1") is np
    assert array_module("cpu") is np


def test_cupy_problem_never_raises_without_a_gpu():
    import torch
    if torch.cuda.is_available():
        return
    cupy_check.cupy_problem.cache_clear()
    assert isinstance(cupy_check.cupy_problem(0), str)
