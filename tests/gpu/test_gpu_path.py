"""Every check of bench/gpu_check.py as a gpu-marked test, so `pytest -m gpu` alone covers
the GPU path: each modality on "cuda" against DALI's CPU backend on the same plan (values
within the stated tolerances, frames aligned), buffer reuse, streams, resume, the adapter,
LOCAL_RANK, the NVML mapping, throughput with the JPEG engine, NVDEC routing, the doctor."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench import gpu_checks as mc
from bench import gpu_checks_device as dc

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return mc.Ctx("cuda", tmp_path_factory.mktemp("gpu_check"), steps=10)


@pytest.mark.parametrize("preset", mc.PRESETS)
@pytest.mark.parametrize("train", [True, False])
def test_image_presets_match_the_cpu_backend(ctx, preset, train):
    mc.image_preset(ctx, preset, train)


@pytest.mark.parametrize("normalize", [False, True])
def test_hyperspectral_matches_the_cpu_backend(ctx, normalize):
    mc.hyperspectral(ctx, normalize)


def test_band_math_runs_on_cupy(ctx):
    assert mc.band_math(ctx)["array_module"] == "cupy"


@pytest.mark.parametrize("pad", ["repeat_last", "variable"])
def test_video_frames_and_fusion_match_the_cpu_backend(ctx, pad):
    mc.video(ctx, pad)
    mc.frame_folders(ctx, pad)
    mc.fusion_clips(ctx, pad)


def test_h264_through_nvdec(ctx):
    pytest.importorskip("av")
    import torch

    from dali_pipes.gpu.nvdec import StreamFormat, generation, route
    family = generation(torch.cuda.get_device_capability())
    assert route(StreamFormat("h264", 256, 256, chroma="420", bit_depth=8), device="gpu",
                 family=family)[0] == "nvdec"
    try:
        mc.video_h264(ctx)
    except RuntimeError as exc:
        if str(exc).startswith("skip:"):
            pytest.skip(str(exc))
        raise


def test_clips_nvdec_cannot_take_still_load(ctx):
    out = mc.small_and_unsupported_clips(ctx)
    assert out["vp9_160x120"]["decoder"] != "nvdec"


def test_device_probe_decodes_vp9_and_h264():
    import torch

    from dali_pipes.gpu.nvdec_probe import probe_codecs
    found = probe_codecs(torch.cuda.current_device())
    assert found.get("vp9") and found.get("h264"), found


@pytest.mark.parametrize("check", [dc.buffer_reuse, dc.streams, dc.resume, dc.adapter,
                                   dc.local_rank, dc.nvml_mapping])
def test_device_checks(ctx, check):
    check(ctx)


def test_images_per_second_and_jpeg_engine(ctx):
    rates = dc.images_per_second(ctx)["images_per_s"]
    assert all(v > 0 for v in rates.values())
    dc.compare_cuda(ctx)


def test_doctor_has_no_failing_row_on_the_gpu():
    run = subprocess.run([sys.executable, "-m", "torch_bridge.tools.doctor", "--json"],
                         capture_output=True, text=True, timeout=180)
    rows = {c["name"]: c for c in json.loads(run.stdout)["checks"]}
    assert rows["mixed pipeline"]["status"] == "ok", rows["mixed pipeline"]
    assert not [c for c in rows.values() if c["status"] == "fail"], rows
