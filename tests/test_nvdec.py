"""dali_pipes.gpu.nvdec routing tables, the pixel-format parsing of the video probe, and the
video modality's device fixed at construction (all on the CPU)."""
from __future__ import annotations

import pytest

from dali_pipes.formats.video import chroma_and_depth, probe_video
from dali_pipes.gpu.nvdec import StreamFormat, generation, nvdec_problem, route


def fmt(codec="h264", w=256, h=256, chroma="420", depth=8, profile=None):
    return StreamFormat(codec=codec, width=w, height=h, chroma=chroma, bit_depth=depth,
                        profile=profile)


@pytest.mark.parametrize("cc, family", [((9, 0), "hopper"), ((8, 0), "ga100"),
                                        ((8, 6), "ga10x"), ((8, 9), "ada"), ((7, 5), "turing"),
                                        ((7, 0), "volta"), ((6, 1), "pascal"),
                                        ((10, 0), "blackwell"), ((12, 0), "blackwell"),
                                        ((5, 2), "maxwell")])
def test_compute_capability_names_the_family(cc, family):
    assert generation(cc) == family


def test_av1_only_where_the_table_has_it():
    for family in ("hopper", "ga100", "turing"):
        assert "no NVDEC av1" in nvdec_problem(fmt("av1"), family)
    for family in ("ga10x", "ada", "blackwell"):
        assert nvdec_problem(fmt("av1"), family) is None
    assert route(fmt("av1"), device="gpu", family="hopper")[0] == "pyav"


@pytest.mark.parametrize("codec, w, h, ok", [
    ("vp9", 160, 120, False), ("vp9", 128, 128, True), ("hevc", 143, 200, False),
    ("hevc", 144, 144, True), ("h264", 32, 24, False), ("h264", 48, 16, True),
    ("h264", 4096, 2160, True), ("h264", 4097, 2160, False), ("mpeg4", 2048, 1080, False)])
def test_coded_size_bounds(codec, w, h, ok):
    assert (nvdec_problem(fmt(codec, w, h), "hopper") is None) == ok


def test_chroma_and_depth_by_generation():
    assert "4:4:4" in nvdec_problem(fmt("hevc", chroma="444"), "volta")
    assert nvdec_problem(fmt("hevc", chroma="444"), "turing") is None
    assert nvdec_problem(fmt("h264", chroma="422"), "hopper") is not None
    assert nvdec_problem(fmt("h264", chroma="444"), "blackwell") is not None
    assert nvdec_problem(fmt("h264", depth=10), "hopper") is not None
    assert "8-bit" in nvdec_problem(fmt("vp9", depth=10), "hopper")  # NVDEC yes, DALI no
    assert nvdec_problem(fmt("prores"), "blackwell") == "NVDEC has no prores decoder"


def test_routes_never_fail_on_the_sample():
    small_vp9 = fmt("vp9", 160, 120)
    assert route(small_vp9, device="gpu", family="hopper")[0] == "dali_cpu"
    assert route(fmt("h264", 32, 24), device="gpu", family="hopper")[0] == "pyav"
    assert route(fmt("h264"), device="gpu", family="hopper") == ("nvdec", "NVDEC decodes it")
    assert route(fmt("vp9"), device="cpu")[0] == "dali_cpu"
    assert route(fmt("h264"), device="cpu")[0] == "pyav"
    assert route(fmt("vp9", depth=10), device="cpu")[0] == "pyav"


def test_a_failed_device_probe_overrides_the_table():
    assert route(fmt("h264"), device="gpu", family="ada", probed={"h264": True})[0] == "nvdec"
    chosen, why = route(fmt("h264"), device="gpu", family="ada", probed={"h264": False})
    assert chosen == "pyav" and "probe" in why
    assert route(fmt("vp9"), device="gpu", family="ada", probed={"vp9": False})[0] == "dali_cpu"


@pytest.mark.parametrize("name, want", [
    ("yuv420p", ("420", 8)), ("yuvj420p", ("420", 8)), ("yuv420p10le", ("420", 10)),
    ("yuv422p", ("422", 8)), ("yuv444p12le", ("444", 12)), ("gray", ("400", 8)),
    ("nv12", ("420", 8)), (None, (None, None)), ("not-a-format", (None, None))])
def test_pixel_format_parsing(name, want):
    assert chroma_and_depth(name) == want


def test_probe_reports_profile_chroma_and_depth(tmp_path):
    from dali_pipes.sample_data.sample_video import small_video_folder
    root = small_video_folder(tmp_path / "v", n_videos=1, frames=(4,), size=(64, 48))
    info = probe_video(next(root.rglob("*.webm")))
    assert (info.codec, info.chroma, info.bit_depth, info.pix_fmt) == ("vp9", "420", 8,
                                                                       "yuv420p")
    assert info.profile == "Profile 0"


def test_video_modality_device_is_fixed_at_construction(tmp_path):
    from dali_pipes.pipelines.config import load_config
    from dali_pipes.sample_data.sample_video import small_video_folder
    from torch_bridge.modalities.video import VideoModality
    root = small_video_folder(tmp_path / "v", n_videos=2, frames=(4,), size=(64, 48))
    mod = VideoModality(root, seed=0, device="cpu", clip_length=2)
    assert mod.dali_device == "cpu" and mod.decoder(0)[0] == "dali_cpu"
    with pytest.raises(ValueError, match="made for DALI device 'cpu'"):
        mod.build_pipeline(device="gpu", batch_size=2, config=load_config(None))
    assert mod.dali_device == "cpu"


@pytest.mark.parametrize("codec", ["vp9", "mjpeg", "h264"])
def test_probe_clips_are_real_256x256_streams(codec):
    import io

    import av

    from dali_pipes.gpu.nvdec_probe import PROBE_FRAMES, PROBE_SIZE, encode_probe_clip
    clip = encode_probe_clip(codec)
    if clip is None:
        pytest.skip(f"no {codec} encoder in this FFmpeg")
    with av.open(io.BytesIO(clip.tobytes())) as f:
        stream = f.streams.video[0]
        decoded = [fr.to_ndarray(format="rgb24") for fr in f.decode(stream)]
    assert len(decoded) == PROBE_FRAMES and decoded[0].shape[:2] == PROBE_SIZE


def test_device_probe_never_raises_without_a_gpu():
    import torch

    from dali_pipes.gpu.nvdec_probe import _decode_mixed, encode_probe_clip
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError):  # what probe_codecs turns into False
        _decode_mixed(encode_probe_clip("vp9"), 0)
