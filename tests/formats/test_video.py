"""probe_video and decode_frames_pyav on tiny videos written with PyAV into tmp_path.

Every frame is a flat colour that encodes its index (red = 8 * (i % 32), green = 8 * (i // 32)),
so a decoded frame names itself within the codecs' error (a few levels of 255).
"""
from __future__ import annotations

import fractions
from pathlib import Path

import av
import numpy as np
import pytest

from dali_pipes.formats import video
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.video import clear_probe_cache, decode_frames_pyav, probe_video

W, H, N, FPS = 64, 48, 40, 25
CODECS = {  # case: (encoder, pixel format, file suffix, muxer, codec name when probed)
    "vp9-webm": ("libvpx-vp9", "yuv420p", ".webm", None, "vp9"),
    "mjpeg-avi": ("mjpeg", "yuvj420p", ".avi", None, "mjpeg"),
    "mjpeg-mkv": ("mjpeg", "yuvj420p", ".mkv", None, "mjpeg"),
    "h264-mp4": ("libx264", "yuv420p", ".mp4", None, "h264"),
    "h264-raw": ("libx264", "yuv420p", ".h264", "h264", "h264"),
}


def has_encoder(name: str) -> bool:
    try:
        av.codec.Codec(name, "w")
    except av.codec.codec.UnknownCodecError:
        return False
    return True


def needs_encoder(case: str):
    encoder = CODECS[case][0]
    return pytest.mark.skipif(not has_encoder(encoder),
                              reason=f"this PyAV build has no {encoder} encoder")


def frame_for(i: int) -> np.ndarray:
    rgb = np.full((H, W, 3), 128, np.uint8)
    rgb[..., 0], rgb[..., 1] = 8 * (i % 32), 8 * (i // 32 % 32)
    return rgb


def index_of(frames: np.ndarray) -> np.ndarray:
    """Frame indices read back from the colours of decoded (T, H, W, 3) frames."""
    mean = frames.reshape(len(frames), -1, 3).mean(axis=1)
    return (np.round(mean[:, 0] / 8) + 32 * np.round(mean[:, 1] / 8)).astype(np.int64)


def write_video(path: Path, case: str, *, n: int = N, gop: int = 10, pts_ms=None) -> Path:
    """`n` frames at FPS; `pts_ms` (n,) gives variable timestamps in milliseconds."""
    encoder, pix_fmt, _, muxer, _ = CODECS[case]
    with av.open(str(path), "w", format=muxer) as container:
        stream = container.add_stream(encoder, rate=FPS)
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = W, H, pix_fmt, gop
        if pts_ms is not None:
            stream.codec_context.time_base = fractions.Fraction(1, 1000)
        for i in range(n):
            frame = av.VideoFrame.from_ndarray(frame_for(i), format="rgb24")
            if pts_ms is not None:
                frame.pts, frame.time_base = int(pts_ms[i]), fractions.Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("videos")
    return {case: write_video(root / f"{case}{CODECS[case][2]}", case)
            for case in CODECS if has_encoder(CODECS[case][0])}


@pytest.mark.parametrize("case", [pytest.param(c, marks=needs_encoder(c)) for c in CODECS])
def test_probe_fields(videos, case):
    info = probe_video(videos[case])
    assert info.path == str(videos[case].resolve())
    assert (info.codec, info.width, info.height, info.frame_count) == (CODECS[case][4], W, H, N)
    assert info.cpu_decodable == (info.codec in {"vp8", "vp9", "mjpeg"})
    assert info.fps == pytest.approx(FPS)
    np.testing.assert_allclose(info.timestamps, np.arange(N) / FPS, atol=1e-9)
    assert info.timestamps.dtype == np.float64 and not info.timestamps.flags.writeable
    assert info.keyframes[0] == 0 and np.all(np.diff(info.keyframes) > 0)
    assert info.indexed_by == ("decode" if case == "h264-raw" else "packets")


def test_container_names_and_keyframes(videos):
    assert probe_video(videos["vp9-webm"]).container == "matroska,webm"
    assert probe_video(videos["mjpeg-avi"]).container == "avi"
    assert len(probe_video(videos["mjpeg-mkv"]).keyframes) == N  # every MJPEG frame is a key
    assert len(probe_video(videos["vp9-webm"]).keyframes) < N // 2


@pytest.mark.parametrize("case", [pytest.param(c, marks=needs_encoder(c)) for c in CODECS])
def test_decode_returns_requested_frames(videos, case):
    wanted = np.array([17, 3, 3, N - 1, 0, 25])
    frames, ts = decode_frames_pyav(videos[case], wanted)
    assert frames.shape == (len(wanted), H, W, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(index_of(frames), wanted)
    np.testing.assert_allclose(ts, wanted / FPS, atol=1e-9)
    assert np.abs(frames.astype(int) - np.stack([frame_for(i) for i in wanted])).max() <= 6


@pytest.mark.parametrize("case", ["vp9-webm", "mjpeg-avi"])
def test_seeking_decode_equals_sequential_decode(videos, case):
    with av.open(str(videos[case])) as container:
        everything = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    wanted = np.array([23, 24, 26, 31, 12])
    frames, _ = decode_frames_pyav(videos[case], wanted)
    np.testing.assert_array_equal(frames, everything[wanted])


def test_variable_frame_timestamps(tmp_path):
    pts_ms = np.cumsum(np.r_[0, np.tile([30, 50, 100], 13)])  # 40 frames, uneven gaps
    path = write_video(tmp_path / "vfr.webm", "vp9-webm", pts_ms=pts_ms)
    info = probe_video(path)
    np.testing.assert_allclose(info.timestamps, pts_ms / 1000, atol=1e-9)
    assert info.fps == pytest.approx((N - 1) / (pts_ms[-1] / 1000))
    frames, ts = decode_frames_pyav(path, [5, 30])
    np.testing.assert_array_equal(index_of(frames), [5, 30])
    np.testing.assert_allclose(ts, pts_ms[[5, 30]] / 1000, atol=1e-9)


def test_decodes_only_from_the_keyframe_to_the_last_frame(tmp_path, monkeypatch):
    path = write_video(tmp_path / "long.webm", "vp9-webm", n=300, gop=30)
    info = probe_video(path)
    decoded = []
    original = video._decoded_frames

    def counting(container, stream, *args):
        for frame in original(container, stream, *args):
            decoded.append(frame.pts)
            yield frame

    monkeypatch.setattr(video, "_decoded_frames", counting)
    wanted = np.arange(200, 208)
    frames, _ = decode_frames_pyav(path, wanted, info=info)
    np.testing.assert_array_equal(index_of(frames), wanted)
    key = info.keyframe_at_or_before(200)
    assert 180 <= key <= 200
    assert len(decoded) == 208 - key  # from the keyframe to the last wanted frame, no more
    assert min(decoded) == info.pts[key]


def test_probe_is_cached_and_refreshed_when_the_file_changes(tmp_path):
    path = write_video(tmp_path / "a.avi", "mjpeg-avi", n=10)
    assert probe_video(path) is probe_video(str(path))
    write_video(path, "mjpeg-avi", n=12)
    assert probe_video(path).frame_count == 12
    first = probe_video(path)
    clear_probe_cache()
    assert probe_video(path) is not first


def test_index_validation(videos):
    path = videos["mjpeg-avi"]
    with pytest.raises(IndexError, match=r"\[40\]"):
        decode_frames_pyav(path, [0, N])
    with pytest.raises(IndexError):
        decode_frames_pyav(path, [-1])
    with pytest.raises(ValueError, match="1-D"):
        decode_frames_pyav(path, [[0, 1]])
    frames, ts = decode_frames_pyav(path, [])
    assert frames.shape == (0, H, W, 3) and ts.shape == (0,)


def expect_format_error(path, field: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        probe_video(path)
    assert caught.value.field == field and str(Path(path).name) in str(caught.value)
    return caught.value


def test_missing_empty_and_random_files(tmp_path):
    expect_format_error(tmp_path / "absent.webm", "file")
    (tmp_path / "folder.mp4").mkdir()
    expect_format_error(tmp_path / "folder.mp4", "file")
    (tmp_path / "empty.mp4").write_bytes(b"")
    expect_format_error(tmp_path / "empty.mp4", "file")
    (tmp_path / "noise.mp4").write_bytes(np.random.default_rng(0).bytes(4096))
    expect_format_error(tmp_path / "noise.mp4", "container")


def test_audio_only_file_has_no_video_stream(tmp_path):
    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16",
                                           layout="mono")
        frame.sample_rate = 8000
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    assert expect_format_error(path, "video_stream").value == ["audio"]


def test_video_stream_without_frames(tmp_path):
    path = tmp_path / "zero.avi"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuvj420p"
        container.start_encoding()
    expect_format_error(path, "frame_count")


def truncate(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


@pytest.mark.parametrize("case", ["vp9-webm", "mjpeg-avi"])
def test_truncated_file_keeps_the_frames_it_holds(videos, tmp_path, case):
    path = truncate(videos[case], tmp_path / f"cut{CODECS[case][2]}")
    info = probe_video(path)
    assert 0 < info.frame_count < N
    wanted = np.arange(info.frame_count)
    frames, _ = decode_frames_pyav(path, wanted)
    np.testing.assert_array_equal(index_of(frames), wanted)


@needs_encoder("h264-mp4")
def test_truncated_mp4_cannot_be_opened(videos, tmp_path):
    path = truncate(videos["h264-mp4"], tmp_path / "cut.mp4")  # its moov index is at the end
    expect_format_error(path, "container")
