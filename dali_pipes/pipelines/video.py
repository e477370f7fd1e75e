"""The video graph: per-sample choice of DALI decoding or frames decoded in the source.

Inputs (`dali_pipes.schema.VIDEO_INPUTS`, fed through `external_source`, per batch):
  "video"           uint8 (n_bytes,)    encoded segment (`remux_segment`); 1 dummy byte for
                                        samples decoded in the source
  "decoded"         uint8 (T, H, W, 3)  frames decoded by PyAV (layout FHWC), already at the
                                        output size when there is one; a (1, 1, 1, 3)
                                        dummy for samples DALI decodes
  "use_dali"        bool ()             True: decode "video" here; False: take "decoded"
  "start_frame"     int32 ()            the clip's first frame within the segment
  "sequence_length" int32 ()            T (the clip length)
  "stride"          int32 ()            distance between the clip's frames
  "mirror"          int32 ()            1 flips every frame of the clip horizontally
  "timestamps"      float64 (T,)        passed through unchanged
  with `crop=True` (resize="short_side", `schema.CLIP_CROP_INPUTS`):
  "crop_start"      float32 (2,)        the clip's crop window in source pixels, (y, x)
  "crop_end"        float32 (2,)        its end; DALI-decoded clips are resized from that
                                        window to `size` (the resize's region of interest,
                                        the plan's window of
                                        `dali_pipes.geometry.clip_crops`); "decoded" clips come
                                        resized and cropped by the feed
Outputs: "frames" float32 (T, 3, H, W) normalized with ImageNet mean/std (layout FCHW),
"timestamps" float64 (T,).

Design: ONE graph with DALI conditionals (`enable_conditionals=True`). The batch is split on
"use_dali": the decoder (`fn.decoders.video`, "cpu" for VP8/VP9/MJPEG, "mixed" = NVDEC on the
GPU) only sees the samples it can decode and resizes them, the others bring their PyAV frames
already resized (torchvision's kernel in the feed: cheaper than DALI's CPU resize and the
torch path's own pixels); the two halves are merged before flip / normalize, so one batch may
mix codecs. Padding past the end of a video repeats its last frame
(`pad_mode="edge"`, equal to `clips.clip_frame_indices` because a
segment ends at the clip's last frame).

Variable-length clips (`variable=True`, the loaders' pad="variable"): "sequence_length" is
each clip's own length L (the frames its video has), so the decoder and the PyAV fallback both
return exactly L frames. After normalization every time field is padded to the longest clip
of the batch with `fn.pad` (axis 0, zeros; float64 timestamps are padded as their int64 bit
pattern, which fn.pad takes, so padding is exactly 0.0). Two more outputs: "length" int64 ()
read from the decoded clip's own shape (not from the feeds) and "mask" bool (Tmax,), True at
the first "length" positions (`fn.ones` of that length, padded with False).
"""
from __future__ import annotations

from typing import Any, Literal

import nvidia.dali.fn as fn
import nvidia.dali.types as types

from dali_pipes import schema
from dali_pipes.formats.video import CPU_DECODABLE_CODECS
from dali_pipes.pipelines.config import PipelineConfig, affine_threads, define_pipeline
from dali_pipes.pipelines.inputs import external_inputs
from dali_pipes.pipelines.resize import resize
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD

# Codecs the "mixed" (NVDEC) video decoder takes by name; the loaders route each file by
# codec, size, chroma, bit depth and GPU family instead (dali_pipes.gpu.nvdec.route).
GPU_DECODABLE_CODECS = frozenset({"h264", "hevc", "vp8", "vp9", "av1"})
INPUTS = schema.names(schema.VIDEO_INPUTS)
OUTPUTS = schema.VIDEO_SCHEMA.outputs
LENGTH_OUTPUTS = schema.LENGTH_OUTPUTS  # appended to a graph's outputs with variable=True
VARIABLE_OUTPUTS = OUTPUTS + LENGTH_OUTPUTS


def dali_decodes(codec: str, device: Literal["cpu", "gpu"]) -> bool:
    """Whether the graph on `device` decodes `codec` itself (else the source decodes it)."""
    return codec in (CPU_DECODABLE_CODECS if device == "cpu" else GPU_DECODABLE_CODECS)


def build_video_pipeline(*, device: Literal["cpu", "gpu"], batch_size: int,
                         config: PipelineConfig, size: tuple[int, int] | None,
                         device_id: int | None = None, variable: bool = False,
                         crop: bool = False):
    """Define (not build) the video graph; `size` (H, W) or None for native resolution;
    `variable`: clips of their own lengths, padded per batch (VARIABLE_OUTPUTS); `crop`:
    DALI-decoded clips are resized from their "crop_start" / "crop_end" window to `size`."""
    check_size(size, crop)
    return define_pipeline(_graph, device=device, batch_size=batch_size, config=config,
                           device_id=device_id, size=size, variable=bool(variable),
                           crop=bool(crop), native_ops=config.native_ops)


def _graph(device: str, size, variable: bool, crop: bool, native_ops: bool):
    frames, timestamps = video_graph(device, size, crop, native_ops)
    if not variable:
        return frames, timestamps
    padded = pad_time(frames), pad_time(timestamps, float64=True)
    return padded + length_and_mask(frames, device)


def check_size(size, crop: bool = False) -> None:
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"size must be None or (height, width) > 0, got {size!r}")
    if crop and size is None:
        raise ValueError("crop=True resizes a window to size: size must not be None")


def crop_inputs(crop: bool):
    """The resize's region of interest, (roi_start, roi_end) from the crop window inputs, or
    None without `crop`."""
    if not crop:
        return None
    start, end = external_inputs(schema.CLIP_CROP_INPUTS)
    return start, end


def video_graph(device: str, size, crop: bool = False, native_ops: bool = True):
    video, decoded, use_dali, start, length, stride, mirror, timestamps = external_inputs(
        schema.VIDEO_INPUTS)
    roi = crop_inputs(crop)
    if use_dali:
        mixed: dict[str, Any] = {} if device == "cpu" else {"affine": affine_threads()}
        frames = fn.decoders.video(video, device="cpu" if device == "cpu" else "mixed", **mixed,
                                   start_frame=start, sequence_length=length, stride=stride,
                                   pad_mode="edge")
        if size is not None:  # "decoded" clips come resized by the feed
            frames = resize(frames, size, device=device, roi=roi, interpolation="bilinear",
                            config=PipelineConfig(antialias=True, native_ops=native_ops))
    else:
        frames = decoded if device == "cpu" else decoded.gpu()
    frames = fn.crop_mirror_normalize(
        frames, device=device, mirror=mirror, dtype=types.FLOAT, output_layout="FCHW",
        mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
    return frames, timestamps


def pad_time(node, float64: bool = False):
    """`node` padded along axis 0 with zeros to the batch's longest sample (`fn.pad`). fn.pad
    has no float64 kernel: `float64=True` pads the int64 bit pattern (0 bits = 0.0)."""
    if not float64:
        return fn.pad(node, axes=[0], fill_value=0)
    bits = fn.pad(fn.reinterpret(node, dtype=types.INT64), axes=[0], fill_value=0)
    return fn.reinterpret(bits, dtype=types.FLOAT64)


def length_and_mask(frames, device: str):
    """("length" int64 (), "mask" bool (Tmax,)) from the unpadded clip's own frame count."""
    count = frames.shape(dtype=types.INT32)[0]
    if device != "cpu":
        count = count.cpu()  # shape of GPU data is on the GPU; fn.ones wants it on the CPU
    mask = fn.pad(fn.ones(shape=fn.stack(count), dtype=types.BOOL), axes=[0], fill_value=0)
    return fn.cast(count, dtype=types.INT64), mask
