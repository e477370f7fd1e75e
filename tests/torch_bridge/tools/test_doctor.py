"""torch_bridge.tools.doctor: the CLI end to end, and each pure check with injected values."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from torch_bridge.tools import doctor
from torch_bridge.tools._check_row import major
from torch_bridge.tools._companions import Imported, torch_for, torchvision_for
from torch_bridge.tools.doctor import Env, GiB

BASE = {"python", "torch", "torchvision", "cuda", "driver", "driver vs torch", "driver vs DALI",
        "torch/DALI CUDA", "dali", "cupy", "CUDA majors", "pinned memory", "/dev/shm",
        "cpu cores", "native operators"}
GPU_ROWS = {"mixed pipeline", "NVDEC", "hardware JPEG decoder", "MIG", "cupy libraries"}


def _expected() -> set[str]:
    import torch
    return BASE | (GPU_ROWS if torch.cuda.is_available() else {"gpu checks"})


EXPECTED = _expected()


def test_cli_json_reports_every_check():
    proc = subprocess.run([sys.executable, "-m", "torch_bridge.tools.doctor", "--json"],
                          capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout)
    names = {c["name"] for c in report["checks"]}
    assert names == EXPECTED
    assert all(c["status"] in ("ok", "warn", "fail", "info") for c in report["checks"])
    assert proc.returncode == (0 if report["ok"] else 1)
    assert report["ok"] == all(c["status"] != "fail" for c in report["checks"])
    env = report["env"]
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    import torch
    assert env["torch_version"] == torch.__version__
    assert env["torch_cuda"] == torch.version.cuda
    assert env["cuda_available"] == torch.cuda.is_available()


def test_cli_table_runs(capsys):
    code = doctor.main(["--batch-bytes", "1000"])
    out = capsys.readouterr().out
    assert "/dev/shm" in out and "torch" in out
    assert code in (0, 1)


def test_probe_without_gpu_does_not_crash():
    env = doctor.probe()
    checks = doctor.run_checks(env)
    assert {c.name for c in checks} == EXPECTED
    if not env.cuda_available:
        pinned = next(c for c in checks if c.name == "pinned memory")
        assert pinned.status in ("info", "ok")


def test_mismatched_cuda_majors_are_explained():
    check = doctor.check_cuda_majors("13.0", 12, None)
    assert check.status == "info"
    assert "CUDA 13" in check.detail and "CUDA 12" in check.detail
    assert "580" in check.advice
    assert doctor.check_cuda_majors("13.0", 12, "12.8").status == "warn"
    assert doctor.check_cuda_majors("13.0", 12, "13.0").status == "info"
    assert doctor.check_cuda_majors("12.4", 12, "12.2").status == "ok"


@pytest.mark.parametrize("build, driver_cuda, status", [
    ("13.0", "12.8", "fail"), ("13.0", "13.0", "ok"), ("12.4", "12.2", "ok"),
    ("12.4", "11.8", "fail"), (12, "13.1", "ok")])
def test_driver_too_old_for_the_build(build, driver_cuda, status):
    check = doctor.check_driver_supports("torch", build, "570.86", driver_cuda)
    assert check.status == status
    if status == "fail":
        assert "upgrade the NVIDIA driver" in check.advice
        assert doctor.MIN_DRIVER[major(build)] in check.advice


def test_no_driver_means_cpu_backend():
    assert doctor.check_driver(None, None, [], "NVML Shared Library Not Found").status == "info"
    assert "CPU backend" in doctor.check_cuda(False, "no driver", []).advice
    assert doctor.check_driver_supports("DALI", 12, None, None).status == "info"
    ok = doctor.check_driver("580.65.06", "13.0", ["NVIDIA H200"], None)
    assert ok.status == "ok" and "H200" in ok.detail


def test_small_or_full_shm_warns():
    assert doctor.check_shm(64 << 20, 64 << 20, 1 << 20).status == "warn"  # docker default
    assert doctor.check_shm(8 * GiB, GiB // 2, GiB).status == "warn"  # less free than needed
    assert doctor.check_shm(8 * GiB, 8 * GiB, GiB).status == "ok"
    missing = doctor.check_shm(None, None, GiB)
    assert missing.status == "warn" and "shm-size" in missing.advice


def test_shm_need_follows_batch_bytes_and_workers():
    env = Env(shm_total=4 * GiB, shm_free=4 * GiB, usable_cores=8)

    def shm(**kw):
        return next(c for c in doctor.run_checks(env, **kw) if c.name == "/dev/shm")

    assert shm(batch_bytes=GiB // 8, workers=4).status == "ok"  # 1 GiB needed
    assert shm(batch_bytes=GiB, workers=4).status == "warn"  # 8 GiB needed


def test_pinned_memory_failure_is_fatal_only_with_cuda():
    assert doctor.check_pinned(None, True).status == "ok"
    assert doctor.check_pinned("no driver", False).status == "info"
    assert doctor.check_pinned("cudaErrorMemoryAllocation", True).status == "fail"


def test_cores_and_packages():
    assert doctor.check_cores(2, 2).status == "warn"
    limited = doctor.check_cores(8, 64)
    assert limited.status == "info" and "affinity" in limited.detail
    assert "'num_workers': 4-6" in doctor.check_cores(8, 8).advice
    # the advice never goes below the default it names
    assert "starts 2 workers" in doctor.check_cores(2, 2).advice
    assert "'num_workers': 2}" in doctor.check_cores(2, 2).advice
    assert doctor.check_dali(None, None).status == "fail"
    assert doctor.check_cupy(None, None, None, None).status == "info"
    assert doctor.check_cupy("13.0", 12, 2, None).status == "ok"


def test_native_operators_row():
    assert doctor.check_native({}).status == "info"
    ok = doctor.check_native({"resize_op": None, "policy_op": None})
    assert ok.status == "ok" and "resize_op, policy_op" in ok.detail
    off = doctor.check_native({"resize_op": None, "policy_op": "no C++ compiler (set CXX)"})
    assert off.status == "warn" and "policy_op: no C++ compiler" in off.detail
    assert "g++" in off.advice


def test_any_fail_makes_exit_code_one(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "probe", lambda: Env(torch_version=None))
    assert doctor.main(["--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_no_gpu_is_one_clear_line():
    (row,) = doctor.gpu_checks(None, "CUDA is not available")
    assert row.name == "gpu checks" and row.status == "info"
    assert row.detail.startswith("skipped: no GPU") and "CUDA is not available" in row.detail


def test_gpu_rows_from_a_probe_result():
    found = {"device": 0, "mixed_image": "(256, 256, 3)",
             "nvdec": {"h264": True, "vp9": True, "av1": False},
             "nvml": {"name": "NVIDIA H200", "jpeg_engine": True, "mig": "disabled"},
             "cupy": {"proof": "CuPy fails on cuda:0: ImportError: libcublas.so.12",
                      "cublas": "ImportError: libcublas.so.12"}}
    rows = {c.name: c for c in doctor.gpu_checks(found)}
    assert set(rows) == GPU_ROWS
    assert rows["mixed pipeline"].status == "ok"
    assert rows["NVDEC"].status == "ok" and "not: av1" in rows["NVDEC"].detail
    assert rows["hardware JPEG decoder"].status == "ok" and "H200" in rows[
        "hardware JPEG decoder"].detail
    assert rows["MIG"].status == "info"
    assert rows["cupy libraries"].status == "warn" and "cupy-cu13" in rows[
        "cupy libraries"].advice
    found["mixed_image"] = "error: RuntimeError: no device"
    found["nvml"]["mig"] = "enabled"
    rows = {c.name: c for c in doctor.gpu_checks(found)}
    assert rows["mixed pipeline"].status == "fail" and rows["MIG"].status == "warn"


@pytest.mark.parametrize("torch_cuda, dali, cupy, status, odd", [
    ("13.0", 13, 13, "ok", None), ("13.0", 12, None, "warn", "DALI"),
    ("13.0", 13, 12, "warn", "CuPy"), ("12.4", 12, 12, "ok", None),
    (None, 13, None, "ok", None)])
def test_cuda_majors_of_torch_dali_and_cupy(torch_cuda, dali, cupy, status, odd):
    (row,) = doctor.cuda_major_checks(torch_cuda, dali, cupy)
    assert row.status == status
    if odd:
        assert odd in row.detail and "[test,cu13,cupy-cu13]" in row.advice


def test_wheel_names_give_the_cuda_major(monkeypatch):
    class Dist:
        def __init__(self, name):
            self.metadata = {"Name": name}
    monkeypatch.setattr(doctor.importlib.metadata, "distributions",
                        lambda: [Dist("numpy"), Dist("cupy-cuda13x"), Dist("nvidia-dali-cuda120")])
    assert doctor._dali_cuda_from_wheel() == 12
    assert doctor._dali_cuda_from_wheel("cupy-cuda") == 13


def test_table_shows_pip_extras_literally(monkeypatch, capsys):
    env = Env(torch_version="2.14", torch_cuda="13.0", dali_version="2.4", dali_cuda=12)
    monkeypatch.setattr(doctor, "probe", lambda: env)
    monkeypatch.setenv("COLUMNS", "400")  # one line per row
    doctor.main([])
    assert "[test,cu13,cupy-cu13]" in capsys.readouterr().out.replace("\n", "")


def test_torch_advice_follows_whether_there_is_a_gpu():
    cpu_build_with_gpu = doctor.check_torch("2.5.1+cpu", None, None, gpu=True)
    assert cpu_build_with_gpu.status == "warn" and "CUDA build" in cpu_build_with_gpu.advice
    cpu_build = doctor.check_torch("2.5.1+cpu", None, None, gpu=False)
    assert cpu_build.status == "ok" and "CUDA" not in cpu_build.advice
    cuda_build = doctor.check_torch("2.5.1+cu124", "12.4", 90100, gpu=False,
                                    torchvision="0.20.1+cu124")
    assert cuda_build.status == "info" and "--index-url https://download.pytorch.org/whl/cpu" \
        in cuda_build.advice and "torch==2.5.1 torchvision==0.20.1" in cuda_build.advice
    assert doctor.check_torch("2.5.1", "12.4", 90100, gpu=True).status == "ok"
    missing = doctor.check_torch(None, None, None, gpu=False, error="ImportError: no torch")
    assert missing.status == "fail" and "ImportError: no torch" in missing.detail


@pytest.mark.parametrize("requires, want", [
    (["numpy", "torch==2.5.1"], "2.5.1"), (["torch (==2.4.1)"], "2.4.1"),
    (["torch (>=2.14.0)"], "2.14.1"), (None, "2.14.1")])
def test_the_torch_a_torchvision_is_built_for(requires, want):
    assert torch_for("0.29.1+cu130", requires) == want
    assert torchvision_for("2.14.1+cpu") == "0.29.1" and torch_for("0.14.0") is None


def test_a_cpu_torch_beside_a_cuda_torchvision_is_named_with_the_fix():
    found = Imported("torchvision", "0.20.1+cu124", "RuntimeError: operator "
                     "torchvision::nms does not exist")
    row = doctor.check_torchvision(found, "2.5.1+cpu", ["torch==2.5.1"], gpu=False)
    assert row.status == "fail" and "torchvision::nms" in row.detail
    assert "torch is a cpu build, torchvision 0.20.1+cu124 a cu124 build" in row.detail
    assert row.advice.startswith("pip install torch==2.5.1 torchvision==0.20.1 --index-url "
                                 "https://download.pytorch.org/whl/cpu")
    older = doctor.check_torchvision(Imported("torchvision", "0.19.1", None), "2.5.1",
                                     ["torch==2.4.1"], gpu=True)
    assert older.status == "warn" and "built for torch 2.4.1, torch is 2.5.1" in older.detail
    assert older.advice == "pip install torch==2.4.1 torchvision==0.19.1"
    ok = doctor.check_torchvision(Imported("torchvision", "0.20.1", None), "2.5.1+cu124",
                                  ["torch==2.5.1"], gpu=True)
    assert ok.status == "ok"
    absent = doctor.check_torchvision(Imported("torchvision", None, "ModuleNotFoundError: "
                                               "torchvision"), "2.5.1+cu124", None, gpu=True)
    assert absent.status == "fail" and absent.advice == (
        "pip install torch==2.5.1 torchvision==0.20.1 --index-url "
        "https://download.pytorch.org/whl/cu124")
