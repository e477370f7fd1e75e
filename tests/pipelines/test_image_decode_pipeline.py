"""The image graph's decode window with EXIF orientation, alpha and JPEG 2000, on DALI's
CPU backend, against Pillow's decode of the same real files."""
from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image, ImageOps

from dali_pipes import schema
from dali_pipes.formats.image_decode import ImageDecode
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image import build_image_pipeline, new_pipeline
from dali_pipes.pipelines.image_decode import decode_inputs, decode_window
from dali_pipes.pipelines.inputs import external_inputs
from tests.pipelines.graph import decodes_on_gpu, output_devices

H, W = 30, 44
CONFIG = PipelineConfig(num_threads=1, prefetch_queue_depth=1, use_fast_idct=False)


def _pixels(alpha: bool = False) -> np.ndarray:
    y, x = np.mgrid[:H, :W]
    planes = [x * 5, y * 8, (x * 3 + y * 2) % 256] + ([255 - x * 4] if alpha else [])
    return np.stack(planes, -1).astype(np.uint8)


def _file(fmt: str, orientation: int | None = None, *, alpha: bool = False, **kw) -> bytes:
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kw["exif"] = exif.tobytes()
    out = io.BytesIO()
    Image.fromarray(_pixels(alpha)).save(out, fmt, **kw)
    return out.getvalue()


def _decode(files, windows, decode: ImageDecode, alphas=None, device: str = "cpu"
            ) -> list[np.ndarray]:
    """Run decode_window on a batch of files and (top, left, h, w) windows."""
    pipe = new_pipeline(device=device, batch_size=len(files), config=CONFIG)
    with pipe:
        jpegs, anchor, shape, *rest = external_inputs(
            schema.IMAGE_INPUTS[:3] + decode_inputs(decode))
        out = decode_window(jpegs, anchor, shape, device, CONFIG, decode,
                            rest[0] if rest else None)
        pipe.set_outputs(out.cpu() if device == "gpu" else out)
    pipe.build()
    pipe.feed_input("jpegs", [np.frombuffer(f, np.uint8) for f in files])
    pipe.feed_input("anchor", [np.array(w[:2], np.int32) for w in windows])
    pipe.feed_input("shape", [np.array(w[2:], np.int32) for w in windows])
    if alphas is not None:
        pipe.feed_input("alpha", alphas)
    (out,) = pipe.run()
    return [np.array(out[i]) for i in range(len(files))]


def _displayed(data: bytes) -> np.ndarray:
    return np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))


@pytest.mark.parametrize("fmt,kw,tol", [("PNG", {}, 0), ("WEBP", {"lossless": True}, 0),
                                        ("TIFF", {}, 0), ("JPEG", {"quality": 95}, 3)])
def test_the_window_is_drawn_on_the_displayed_image(fmt, kw, tol):
    """adjust_orientation=True: DALI turns the image first; anchor and shape refer to the
    turned image (5-8 swap height and width), as Pillow's exif_transpose shows it."""
    files = [_file(fmt, o, **kw) for o in range(1, 9)]
    windows = [(3, 5, 20, 18) if o < 5 else (5, 3, 30, 14) for o in range(1, 9)]
    got = _decode(files, windows, ImageDecode(orientation=True))
    for o, (data, (t, left, h, w), out) in enumerate(zip(files, windows, got, strict=True), 1):
        want = _displayed(data)[t:t + h, left:left + w]
        assert out.shape == want.shape, o
        assert np.abs(out.astype(int) - want).max() <= tol, o


def test_without_adjust_orientation_the_stored_pixels_are_decoded():
    files = [_file(fmt, 6) for fmt in ("PNG", "TIFF")]
    got = _decode(files, [(2, 4, 10, 30)] * 2, ImageDecode())
    for out in got:
        assert np.array_equal(out, _pixels()[2:12, 4:34])


@pytest.mark.parametrize("value", [9, 0])
def test_dali_ignores_an_orientation_outside_1_to_8_as_our_parser_does(value):
    entry = struct.pack("<HHI", 0x0112, 3, 1) + struct.pack("<H", value) + b"\0\0"
    block = b"Exif\x00\x00II*\x00" + struct.pack("<IH", 8, 1) + entry + b"\0" * 4
    data = _file("JPEG", quality=95)
    data = data[:2] + b"\xff\xe1" + struct.pack(">H", len(block) + 2) + block + data[2:]
    (out,) = _decode([data], [(0, 0, H, W)], ImageDecode(orientation=True))
    assert out.shape == (H, W, 3)
    assert np.abs(out.astype(int) - _pixels()).mean() < 2


@pytest.mark.parametrize("kw", [{}, {"no_jp2": True}])
def test_jpeg2000_windows_decode_exactly(kw):
    """Lossless JPEG 2000 (Pillow's default), .jp2 and raw J2K: DALI's CPU decoder reads it."""
    (out,) = _decode([_file("JPEG2000", **kw)], [(4, 6, 20, 30)], ImageDecode())
    assert np.array_equal(out, _pixels()[4:24, 6:36])


def test_alpha_is_appended_as_a_fourth_channel():
    data = _file("PNG", alpha=True)
    alpha = np.ascontiguousarray(_pixels(True)[4:24, 6:36, 3:])
    (out,) = _decode([data], [(4, 6, 20, 30)], ImageDecode(alpha=True), [alpha])
    assert out.shape == (20, 30, 4) and np.array_equal(out, _pixels(True)[4:24, 6:36])


def test_gpu_graph_with_every_decode_option_is_defined():
    """Defining it makes DALI check the mixed decoder's arguments, no GPU needed."""
    decode = ImageDecode(orientation=True, alpha=True)
    pipe = build_image_pipeline(device="gpu", batch_size=2, size=16, config=PipelineConfig(),
                                decode=decode)
    assert output_devices(pipe) == ["gpu"] and decodes_on_gpu(pipe)


def test_missing_alpha_input_is_a_clear_error():
    pipe = new_pipeline(device="cpu", batch_size=1, config=CONFIG)
    with pipe, pytest.raises(ValueError, match="'alpha'"):
        jpegs, anchor, shape = external_inputs(schema.IMAGE_INPUTS[:3])
        decode_window(jpegs, anchor, shape, "cpu", CONFIG, ImageDecode(alpha=True))


@pytest.mark.gpu
def test_gpu_decoder_draws_the_window_on_the_displayed_image_too():
    """The mixed decoder (nvJPEG / nvImageCodec) with orientation and alpha gives what the
    CPU decoder gives (JPEG decoders differ by a few levels)."""
    files = [_file("JPEG", o, quality=95) for o in (1, 3, 6, 8)] + [_file("PNG", 6)]
    windows = [(3, 5, 20, 18), (3, 5, 20, 18), (5, 3, 30, 14), (5, 3, 30, 14), (5, 3, 30, 14)]
    alphas = [np.full((h, w, 1), 200, np.uint8) for *_, h, w in windows]
    decode = ImageDecode(orientation=True, alpha=True)
    cpu = _decode(files, windows, decode, alphas)
    gpu = _decode(files, windows, decode, alphas, device="gpu")
    for a, b in zip(cpu, gpu, strict=True):
        assert a.shape == b.shape and np.abs(a.astype(int) - b).mean() < 3
