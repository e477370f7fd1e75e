"""A one-time probe of what DALI's mixed (NVDEC) video decoder really decodes on a device.

`probe_codecs(device_id)` encodes a tiny 256x256 clip per codec in memory with PyAV (only
codecs whose encoder this FFmpeg build has), decodes each through `fn.decoders.video(...,
device="mixed")` and records codec -> True (decoded, right frame count and size) / False
(DALI or the driver refused it). Codecs without an encoder are left out, so routing falls
back to the `dali_pipes.gpu.nvdec` tables for them. Results are cached per device and process.
Needs CUDA; without it every entry is False (`probe_codecs` never raises).
"""
from __future__ import annotations

import functools
import io

import numpy as np

PROBE_SIZE = (256, 256)  # (H, W): above every codec's NVDEC minimum coded size
PROBE_FRAMES = 6
# codec (as formats.video names it) -> (PyAV encoder candidates, container format)
ENCODERS = {
    "h264": (("libx264", "h264"), "matroska"), "hevc": (("libx265", "hevc"), "matroska"),
    "vp9": (("libvpx-vp9",), "webm"), "vp8": (("libvpx",), "webm"),
    "av1": (("libsvtav1", "libaom-av1", "librav1e"), "matroska"),
    "mpeg4": (("mpeg4",), "avi"), "mjpeg": (("mjpeg",), "avi"),
}


def encode_probe_clip(codec: str) -> np.ndarray | None:
    """A PROBE_FRAMES-frame clip of `codec` as uint8 bytes, or None without an encoder.

    Args:
        codec: a key of ENCODERS.
    Returns:
        the encoded file's bytes (uint8 (n,)) or None.
    """
    import av

    names, container_format = ENCODERS[codec]
    encoder = next((n for n in names if n in av.codecs_available), None)
    if encoder is None:
        return None
    h, w = PROBE_SIZE
    buffer = io.BytesIO()
    try:
        with av.open(buffer, mode="w", format=container_format) as out:
            stream = out.add_stream(encoder, rate=10)
            stream.width, stream.height = w, h
            stream.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
            if encoder == "libx265":
                stream.options = {"x265-params": "log-level=error"}
            for t in range(PROBE_FRAMES):
                pixels = np.full((h, w, 3), 40 * t % 256, np.uint8)
                pixels[:, : w // 2] = 200
                for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    except (av.error.FFmpegError, ValueError):  # an encoder listed but unusable here
        return None
    return np.frombuffer(buffer.getvalue(), np.uint8).copy()


def _decode_mixed(clip: np.ndarray, device_id: int) -> tuple[int, ...]:
    """Shape of the first sample DALI's mixed video decoder gives for `clip`."""
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=device_id, prefetch_queue_depth=1)
    def pipe():
        data = fn.external_source(source=lambda: [clip], batch=True, dtype=types.UINT8,
                                  ndim=1, name="clip")
        return fn.decoders.video(data, device="mixed")

    p = pipe()
    p.build()
    (out,) = p.run()
    return tuple(out.as_cpu().as_array().shape[1:])


@functools.cache
def probe_codecs(device_id: int) -> dict[str, bool]:
    """codec -> whether DALI's mixed decoder decoded the probe clip on GPU `device_id`.

    Args:
        device_id: the CUDA device number.
    Returns:
        one entry per codec that has an encoder here (see module docstring).
    """
    results = {}
    for codec in ENCODERS:
        clip = encode_probe_clip(codec)
        if clip is None:
            continue
        try:
            shape = _decode_mixed(clip, device_id)
        except Exception:  # noqa: BLE001 - any refusal (RuntimeError from DALI) is the answer
            results[codec] = False
            continue
        results[codec] = shape[1:3] == PROBE_SIZE and shape[0] >= 1
    return results
