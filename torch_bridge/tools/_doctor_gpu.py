"""The doctor's GPU rows: what only a run on the device shows (used by torch_bridge.tools.doctor).

`probe_gpu(index)` builds and runs a one-image mixed (nvJPEG) pipeline, decodes a tiny clip
per codec with DALI's mixed decoder (`dali_pipes.gpu.nvdec_probe`), asks NVML for the hardware
JPEG decoder (NVJPG) and the MIG mode of the device, and checks that CuPy's CUDA libraries
load (`dali_pipes.gpu.cupy_check`). Each probe records its failure instead of raising.
`gpu_checks(found)` turns the result into Check rows; without CUDA it is one row saying the
GPU checks were skipped. `cuda_major_checks` compares the CUDA majors of torch, DALI, CuPy.
"""
from __future__ import annotations

import io
from typing import Any

from torch_bridge.tools._check_row import Check, major

CUPY_LIBS = ("cublas", "cusolver", "cusparse", "curand", "cufft", "nvrtc")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


def _mixed_image(index: int) -> str:
    """Decode one 256x256 JPEG with fn.decoders.image(device="mixed"); the output shape."""
    import numpy as np
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((256, 256, 3), 128, np.uint8)).save(buffer, format="JPEG")
    jpeg = np.frombuffer(buffer.getvalue(), np.uint8)

    @pipeline_def(batch_size=1, num_threads=1, device_id=index, prefetch_queue_depth=1)
    def pipe():
        data = fn.external_source(source=lambda: [jpeg], batch=True, dtype=types.UINT8)
        return fn.decoders.image(data, device="mixed", output_type=types.RGB)

    p = pipe()
    p.build()
    (out,) = p.run()
    return str(tuple(out.as_cpu().as_array().shape[1:]))


def _nvml(index: int) -> dict[str, Any]:
    """{"name", "jpeg_engine": True / False / None (unknown), "mig": "enabled" / ...}."""
    import pynvml
    import torch

    props = torch.cuda.get_device_properties(index)
    pynvml.nvmlInit()
    uuid = str(getattr(props, "uuid", ""))
    try:  # NVML's order ignores CUDA_VISIBLE_DEVICES: find the device by UUID / bus id
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-")
                                                  else f"GPU-{uuid}")
    except Exception:  # noqa: BLE001 - a MIG slice or an old driver
        # torch's stub does not list the PCI fields its device properties carry
        domain, bus, device = (getattr(props, f"pci_{part}_id")
                               for part in ("domain", "bus", "device"))
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(f"{domain:08x}:{bus:02x}:{device:02x}.0")
    facts: dict[str, Any] = {"name": props.name}
    try:
        pynvml.nvmlDeviceGetJpgUtilization(handle)
        facts["jpeg_engine"] = True
    except Exception as exc:  # noqa: BLE001 - NVML_ERROR_NOT_SUPPORTED: no NVJPG engine
        facts["jpeg_engine"] = False if "Not Supported" in str(exc) else None
        facts["jpeg_error"] = _error(exc)
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
        facts["mig"] = "enabled" if current else "disabled"
    except Exception as exc:  # noqa: BLE001 - GPUs without MIG say Not Supported
        facts["mig"] = "not supported" if "Not Supported" in str(exc) else _error(exc)
    return facts


def _cupy_libs(index: int) -> dict[str, str]:
    import importlib

    from dali_pipes.gpu.cupy_check import cupy_problem
    out = {"proof": cupy_problem(index) or "ok"}
    for lib in CUPY_LIBS:
        try:
            importlib.import_module(f"cupy_backends.cuda.libs.{lib}")
            out[lib] = "ok"
        except Exception as exc:  # noqa: BLE001 - ImportError of a missing CUDA library
            out[lib] = _error(exc)
    return out


def probe_gpu(index: int) -> dict[str, Any]:
    """Every GPU probe on CUDA device `index`; a probe that fails records "error: ..."."""
    found: dict[str, Any] = {"device": index}
    steps = {"mixed_image": _mixed_image, "nvml": _nvml, "cupy": _cupy_libs}
    for name, step in steps.items():
        try:
            found[name] = step(index)
        except Exception as exc:  # noqa: BLE001 - the doctor reports, it never raises
            found[name] = f"error: {_error(exc)}"
    try:
        from dali_pipes.gpu.nvdec_probe import probe_codecs
        found["nvdec"] = probe_codecs(index)
    except Exception as exc:  # noqa: BLE001
        found["nvdec"] = f"error: {_error(exc)}"
    return found


def gpu_checks(found: dict[str, Any] | None, why_not: str | None = None) -> list:
    """Check rows from `probe_gpu`'s result; one "gpu checks" info row when it is None.

    Args:
        found: probe_gpu's dict, or None when no GPU was probed.
        why_not: the reason it was not (e.g. "CUDA is not available").
    Returns:
        a list of torch_bridge.tools._check_row.Check.
    """

    if found is None:
        return [Check("gpu checks", "info", f"skipped: no GPU ({why_not or 'no CUDA device'})",
                      "mixed pipeline, NVDEC, hardware JPEG decoder, MIG and CuPy libraries "
                      "are checked on a machine with a GPU")]
    rows = []
    image = found.get("mixed_image")
    bad = str(image).startswith("error")
    rows.append(Check("mixed pipeline", "fail" if bad else "ok",
                      f"one JPEG through fn.decoders.image(device='mixed'): {image}",
                      "DALI cannot use this GPU: see the error and doctor's driver rows"
                      if bad else ""))
    rows.append(_nvdec_row(found.get("nvdec")))
    rows.extend(_nvml_rows(found.get("nvml")))
    rows.append(_cupy_row(found.get("cupy")))
    return rows


def _nvdec_row(nvdec):
    if not isinstance(nvdec, dict):
        return Check("NVDEC", "warn", f"probe failed: {nvdec}",
                     "video decoding falls back to DALI's CPU decoder / PyAV")
    ok = sorted(c for c, v in nvdec.items() if v)
    no = sorted(c for c, v in nvdec.items() if not v)
    detail = f"decoded through DALI's mixed decoder: {', '.join(ok) or 'none'}"
    if no:
        detail += f"; not: {', '.join(no)} (those go to DALI's CPU decoder or PyAV)"
    return Check("NVDEC", "ok" if ok else "warn", detail)


def _nvml_rows(nvml):
    if not isinstance(nvml, dict):
        return [Check("hardware JPEG decoder", "info", f"NVML unavailable: {nvml}")]
    engine = nvml.get("jpeg_engine")
    text = {True: "present (NVJPG engine: hw_decoder_load applies)",
            False: "absent on this GPU (nvJPEG decodes with CUDA)",
            None: f"unknown: {nvml.get('jpeg_error')}"}[engine]
    mig = nvml.get("mig")
    return [Check("hardware JPEG decoder", "ok" if engine else "info",
                  f"{nvml.get('name')}: {text}"),
            Check("MIG", "warn" if mig == "enabled" else "info", f"MIG mode {mig}",
                  "a MIG slice may have no NVDEC / NVJPG engines and NVML reports no "
                  "utilisation for it" if mig == "enabled" else "")]


def _cupy_row(cupy):
    if not isinstance(cupy, dict):
        return Check("cupy libraries", "info", f"not checked: {cupy}")
    libs = ", ".join(f"{k} {v}" for k, v in cupy.items() if k != "proof")
    if cupy.get("proof") != "ok":
        return Check("cupy libraries", "warn", f"{cupy.get('proof')}; {libs}",
                     "band statistics and PCA use numpy; install the CuPy of torch's CUDA "
                     "major with its libraries: pip install -e '.[cupy-cu13]' (or cupy-cu12)")
    return Check("cupy libraries", "ok", f"matmul, eigh and a reduction match numpy; {libs}")


def cuda_major_checks(torch_cuda, dali_cuda, cupy_cuda) -> list:
    """One row comparing the CUDA majors of torch, DALI and CuPy (None: not installed)."""

    found = (("torch", torch_cuda), ("DALI", dali_cuda), ("CuPy", cupy_cuda))
    majors = {name: m for name, v in found if (m := major(v)) is not None}
    detail = ", ".join(f"{k} CUDA {v}" for k, v in majors.items()) or "none installed"
    if len(set(majors.values())) <= 1:
        return [Check("CUDA majors", "ok", detail)]
    want = majors.get("torch") or max(majors.values())
    odd = [k for k, v in majors.items() if v != want]
    return [Check("CUDA majors", "warn", f"{detail}: {', '.join(odd)} differ from CUDA {want}",
                  f"install the wheels of one CUDA major: pip install -e '.[test,cu{want},"
                  f"cupy-cu{want}]' (a CuPy of another major misses cuBLAS / cuSOLVER)")]
