"""Which decoder takes a video stream: NVDEC (DALI's "mixed" decoder), DALI's CPU decoder,
or the PyAV fallback in the feeding process. Pure functions and tables (no DALI, no torch).

NVDEC's abilities depend on the GPU generation and on the stream's profile, chroma format,
bit depth and coded size; a stream NVDEC cannot take must never reach the mixed decoder,
where its failure would be blamed on the sample (`on_error="raise"` stops, `"skip"` drops
every such clip). `route()` decides from two tables, taken from NVIDIA's documents:

- `GENERATION_FEATURES`: the NVDEC Application Note, table "NVDEC Hardware Capabilities"
  (Video Codec SDK 13.0, https://docs.nvidia.com/video-technologies/video-codec-sdk/13.0/
  nvdec-application-note/index.html), one column per GPU family. Its facts used here: AV1
  Main only on GA10x (Ampere other than GA100), Ada and Blackwell, so not on Turing, A100,
  H100 or H200; HEVC 4:4:4 from Turing; H.264 High10 / High 4:2:2 and HEVC 4:2:2 only on
  Blackwell; VP8, VP9 profile 0 and HEVC Main/Main10 from (select) 2nd-generation Maxwell,
  on every GPU from Pascal on; MPEG-4 Simple / Advanced Simple, H.264 Baseline/Main/High and
  MPEG-2 on all.
- `CODEC_LIMITS`: the NVDEC Video Decoder API Programming Guide, table "Hardware Video
  Decoder Capabilities" (same SDK, nvdec-video-decoder-api-prog-guide): coded-size bounds
  per codec (minimum 48x16 for H.264, VP8 and MPEG-4, 144x144 for HEVC, 128x128 for VP9
  and AV1, 64x64 for JPEG; maximum 4096 for H.264 before Blackwell, 2032 for MPEG-4,
  8192 for HEVC, VP9 and AV1) and the chroma formats / bit depths each codec decodes.

The tables are refined on the device by a one-time probe (`dali_pipes.gpu.nvdec_probe`: a
tiny clip per codec through DALI's mixed decoder): a codec the table allows but the probe
could not decode on this GPU (a DALI build or driver without it) is routed away too.
Anything NVDEC cannot take goes to DALI's CPU decoder when it decodes the codec (VP8, VP9,
MJPEG: `formats.video.CPU_DECODABLE_CODECS`), else to PyAV; DALI decodes 8-bit output
only, so streams deeper than 8 bits also go to PyAV. See docs/gpu.md for the table.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Route = Literal["nvdec", "dali_cpu", "pyav"]
CPU_CODECS = frozenset({"vp8", "vp9", "mjpeg"})  # = formats.video.CPU_DECODABLE_CODECS


@dataclass(frozen=True)
class StreamFormat:
    """What routing looks at in a stream (from `formats.video.VideoInfo`); None: unknown."""

    codec: str
    width: int
    height: int
    profile: str | None = None
    chroma: str | None = None  # "420", "422", "444", "400" (gray), "other"
    bit_depth: int | None = None


@dataclass(frozen=True)
class CodecLimits:
    """Coded-size bounds and formats NVDEC decodes for one codec (before extensions)."""

    min_size: tuple[int, int]  # (width, height)
    max_size: tuple[int, int]
    chroma: frozenset[str]
    bit_depths: frozenset[int]
    feature: str  # the GENERATION_FEATURES entry a GPU needs for this codec


_C420 = frozenset({"420"})
CODEC_LIMITS: dict[str, CodecLimits] = {
    "h264": CodecLimits((48, 16), (4096, 4096), _C420, frozenset({8}), "h264"),
    "hevc": CodecLimits((144, 144), (8192, 8192), frozenset({"420", "444"}),
                        frozenset({8, 10, 12}), "hevc"),
    "vp9": CodecLimits((128, 128), (8192, 8192), _C420, frozenset({8, 10, 12}), "vp9"),
    "vp8": CodecLimits((48, 16), (4096, 4096), _C420, frozenset({8}), "vp8"),
    "av1": CodecLimits((128, 128), (8192, 8192), _C420, frozenset({8, 10}), "av1"),
    "mpeg4": CodecLimits((48, 16), (2032, 2032), _C420, frozenset({8}), "mpeg4"),
    "mjpeg": CodecLimits((64, 64), (32768, 16384), frozenset({"420", "422", "444", "400"}),
                         frozenset({8}), "mjpeg"),
}

_BASE = frozenset({"h264", "mpeg4", "mjpeg"})
_PASCAL = _BASE | {"vp8", "vp9", "hevc", "vp9_high_depth", "hevc_12bit"}
_TURING = _PASCAL | {"hevc_444"}
_GA10X = _TURING | {"av1"}
_BLACKWELL = _GA10X | {"h264_high10_422", "hevc_422", "h264_8k"}
# family -> NVDEC features (Application Note table; "select" GPUs counted as lacking it).
GENERATION_FEATURES: dict[str, frozenset[str]] = {
    "maxwell": _BASE, "pascal": _PASCAL, "volta": _PASCAL, "turing": _TURING,
    "ga100": _TURING, "hopper": _TURING, "ga10x": _GA10X, "ada": _GA10X,
    "blackwell": _BLACKWELL,
}


def generation(capability: tuple[int, int]) -> str:
    """The GPU family of a CUDA compute capability (major, minor), as the table names it.

    Args:
        capability: e.g. (9, 0) for H100/H200, (8, 0) for A100, (8, 6) for RTX 30xx.
    Returns:
        a key of GENERATION_FEATURES.
    """
    major, minor = capability
    if major >= 10:
        return "blackwell"
    table = {(9, 0): "hopper", (8, 9): "ada", (8, 0): "ga100", (7, 5): "turing"}
    if (major, minor) in table:
        return table[(major, minor)]
    return {8: "ga10x", 7: "volta", 6: "pascal"}.get(major, "maxwell")


def nvdec_problem(fmt: StreamFormat, family: str) -> str | None:
    """Why NVDEC of GPU family `family` cannot decode `fmt` (None: it can, per the tables).

    Args:
        fmt: the stream's codec, coded size, chroma format, bit depth, profile.
        family: a key of GENERATION_FEATURES (see `generation`).
    Returns:
        None, or a one-line reason naming the table entry that excludes the stream.
    """
    limits = CODEC_LIMITS.get(fmt.codec)
    if limits is None:
        return f"NVDEC has no {fmt.codec} decoder"
    features = GENERATION_FEATURES[family]
    if limits.feature not in features:
        return f"{family} GPUs have no NVDEC {fmt.codec} decoder"
    max_w, max_h = limits.max_size
    if fmt.codec == "h264" and "h264_8k" in features:
        max_w, max_h = 8192, 8192
    (min_w, min_h) = limits.min_size
    if not (min_w <= fmt.width <= max_w and min_h <= fmt.height <= max_h):
        return (f"{fmt.width}x{fmt.height} is outside NVDEC's {fmt.codec} range "
                f"{min_w}x{min_h} .. {max_w}x{max_h}")
    return _format_problem(fmt, limits, features, family)


def _format_problem(fmt: StreamFormat, limits: CodecLimits, features: frozenset[str],
                    family: str) -> str | None:
    chroma, depth = fmt.chroma or "420", fmt.bit_depth or 8
    allowed = set(limits.chroma)
    if fmt.codec == "hevc" and "hevc_422" in features:
        allowed.add("422")
    if fmt.codec == "h264" and "h264_high10_422" in features:
        allowed.add("422")
    if fmt.codec == "hevc" and chroma == "444" and "hevc_444" not in features:
        return f"{family} GPUs have no HEVC 4:4:4 decoding"
    if chroma not in allowed:
        return f"NVDEC on {family} GPUs decodes {fmt.codec} in {sorted(allowed)} chroma, " \
               f"not {chroma}"
    depths = set(limits.bit_depths) | ({10} if fmt.codec == "h264" and
                                       "h264_high10_422" in features else set())
    if depth not in depths:
        return f"NVDEC decodes {fmt.codec} at {sorted(depths)} bits, not {depth}"
    if depth > 8:
        return f"DALI's video decoder outputs 8-bit frames; a {depth}-bit stream goes to PyAV"
    return None


def route(fmt: StreamFormat, *, device: Literal["cpu", "gpu"], family: str | None = None,
          probed: Mapping[str, bool] | None = None) -> tuple[Route, str]:
    """The decoder for a stream and why.

    Args:
        fmt: the stream (see StreamFormat).
        device: the DALI graph's device.
        family: the GPU family (`generation`), needed when device is "gpu".
        probed: codec -> whether the device probe decoded it (missing: not probed).
    Returns:
        (route, reason): "nvdec", "dali_cpu" (DALI's CPU decoder) or "pyav".
    """
    problem = "the graph runs on DALI's CPU backend"
    if device == "gpu":
        gpu_problem = nvdec_problem(fmt, family or "maxwell")
        if gpu_problem is None and probed is not None and probed.get(fmt.codec) is False:
            gpu_problem = f"the device probe could not decode {fmt.codec} with DALI's mixed decoder"
        if gpu_problem is None:
            return "nvdec", "NVDEC decodes it"
        problem = gpu_problem
    if fmt.codec in CPU_CODECS and (fmt.bit_depth or 8) == 8:
        return "dali_cpu", problem
    return "pyav", problem + "; DALI's CPU decoder does not take it either"
