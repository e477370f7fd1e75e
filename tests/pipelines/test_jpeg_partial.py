"""DpDecodeCropResize (dali_pipes/native/decode_crop_op.cc, dali_pipes.pipelines.jpeg_partial):
a JPEG crop window decoded with libjpeg-turbo's partial decoding and resized gives the pixels
of DALI's full-window decoder + the same resize, at full scale exactly (windows at the
image's edges, progressive, 4:4:4 / 4:2:2 / 4:2:0, grey); at a reduced DCT scale those of
the feed's simplejpeg path; files it does not decode (CMYK, PNG, truncated) go through
DALI's decoder; an undecodable file fails its sample. The flip and normalisation it fuses
give crop_mirror_normalize's values, and the image graph fuses them only where nothing
comes between the resize and the normalisation."""
from __future__ import annotations

import io

import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.types as types
import pytest
from nvidia.dali import Pipeline
from PIL import Image

from dali_pipes import native
from dali_pipes.formats.jpeg_scale import dct_factors, decode_scaled, scaled_boxes
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image import build_image_pipeline
from dali_pipes.pipelines.jpeg_partial import Finish, decode_crop_resize, partial_decode_applies
from dali_pipes.recipes import Crop, ImageRecipe, Output
from dali_pipes.sample_data.sample_images import photo_like
from tests.conftest import undefined_quant_table
from tests.pipelines.graph import graph_ops

CONFIG = PipelineConfig(num_threads=2, prefetch_queue_depth=1)


@pytest.fixture(scope="module", autouse=True)
def _operator():
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    if native.library("resize_op") is None:
        pytest.fail(f"DpResize unavailable: {native.why_not('resize_op')}")
    if native.library("decode_crop_op") is None:
        why = native.why_not("decode_crop_op") or ""
        if "jpeglib.h" in why:
            pytest.skip(f"libjpeg-turbo's headers are missing: {why}")
        pytest.fail(f"DpDecodeCropResize unavailable: {why}")


def _jpeg(pixels, mode="RGB", **options) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buf, format="JPEG", quality=90, **options)
    return buf.getvalue()


def _run(files, windows, size, *, max_dct_factor=1):
    """(DpDecodeCropResize through the graph's routing, image_slice + DpResize) outputs."""
    pipe = Pipeline(batch_size=len(files), num_threads=2, device_id=None, exec_dynamic=True)
    with pipe:
        j = fn.external_source(name="j")
        a = fn.external_source(name="a")
        s = fn.external_source(name="s")
        new = decode_crop_resize(j, a, s, size, config=CONFIG, interpolation="bilinear",
                                 max_dct_factor=max_dct_factor)
        ref = fn.decoders.image_slice(j, a, s, axis_names="HW", normalized_anchor=False,
                                      normalized_shape=False, output_type=types.RGB)
        ref = fn.dp_resize(ref, types.Constant(np.asarray(size, np.int32), device="cpu"))
        pipe.set_outputs(new, ref)
    pipe.build()
    pipe.feed_input("j", [np.frombuffer(f, np.uint8) for f in files])
    pipe.feed_input("a", [np.asarray(w[:2], np.int32) for w in windows])
    pipe.feed_input("s", [np.asarray(w[2:], np.int32) for w in windows])
    new, ref = pipe.run()
    return ([np.array(new[i]) for i in range(len(files))],
            [np.array(ref[i]) for i in range(len(files))])


def _windows(h, w):
    """Windows at every edge and corner, odd offsets and sizes, the whole image."""
    return [(0, 0, h, w), (0, 0, 17, 23), (h - 31, w - 45, 31, 45), (0, w - 9, h, 9),
            (h - 5, 0, 5, w), (13, 27, h // 2 + 3, w // 3 + 5), (h - 40, 3, 40, 100)]


@pytest.mark.parametrize("options", [
    dict(subsampling="4:2:0"), dict(subsampling="4:2:2"), dict(subsampling="4:4:4"),
    dict(subsampling="4:2:0", progressive=True), dict(mode="L"),
    dict(subsampling="4:2:0", restart_marker_blocks=1)])
def test_full_scale_equals_dalis_decoder_then_the_resize(options):
    mode = options.pop("mode", "RGB")
    pixels = photo_like(np.random.default_rng(3), 123, 181)
    data = _jpeg(pixels, mode, **options)
    windows = _windows(123, 181)
    for size in ((24, 24), (50, 70), (130, 190)):  # down, mixed, up
        new, ref = _run([data] * len(windows), windows, size)
        for w, a, b in zip(windows, new, ref, strict=True):
            assert a.shape == (*size, 3)
            np.testing.assert_array_equal(a, b, err_msg=f"window {w} to {size}")


def test_reduced_dct_scale_equals_the_feeds_simplejpeg_path():
    pixels = photo_like(np.random.default_rng(4), 400, 520)
    data = _jpeg(pixels, subsampling="4:2:0")
    windows = np.array([(0, 0, 400, 520), (7, 11, 130, 250), (270, 390, 130, 130),
                        (1, 2, 399, 66)])
    size = 32
    factors = dct_factors(windows, size)
    assert set(factors.tolist()) == {2, 4, 8}
    new, _ = _run([data] * len(windows), windows, (size, size), max_dct_factor=8)
    boxes, start, end = scaled_boxes(windows, factors, np.array([(400, 520)] * len(windows)))
    for i, (f, (y0, x0, y1, x1)) in enumerate(zip(factors, boxes, strict=True)):
        box = decode_scaled(data, int(f), (400, 520), path="x", fast_idct=False)[y0:y1, x0:x1]
        pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, exec_dynamic=True)
        with pipe:
            pipe.set_outputs(fn.dp_resize(
                types.Constant(np.ascontiguousarray(box), device="cpu"),
                types.Constant(np.array([size, size], np.int32), device="cpu"),
                types.Constant(start[i], device="cpu"), types.Constant(end[i], device="cpu")))
        pipe.build()
        np.testing.assert_array_equal(new[i], np.array(pipe.run()[0][0]), err_msg=str(i))


def test_files_it_does_not_decode_go_through_dalis_decoder():
    pixels = photo_like(np.random.default_rng(5), 64, 80)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    good = _jpeg(pixels)
    files = [_jpeg(pixels, "CMYK"), png.getvalue(), good, _jpeg(pixels, "L")]
    windows = [(3, 5, 40, 50)] * len(files)
    new, ref = _run(files, windows, (20, 24))
    for i, (a, b) in enumerate(zip(new, ref, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"file {i}")
    assert np.abs(new[0].astype(int) - new[2]).mean() < 8  # CMYK decoded, not garbage


@pytest.mark.parametrize("kind", ["undefined table", "truncated"])
def test_a_broken_file_fails_its_batch(kind):
    good = _jpeg(photo_like(np.random.default_rng(6), 64, 80))
    bad = undefined_quant_table(good) if kind == "undefined table" else good[: len(good) // 2]
    with pytest.raises(RuntimeError, match="could not decode|Premature end|decode"):
        _run([good, bad], [(0, 0, 64, 80)] * 2, (16, 16))


def test_the_image_graph_uses_it_where_the_config_allows():
    assert partial_decode_applies("cpu", CONFIG, "bilinear", None)
    for config, device, interp in ((CONFIG, "gpu", "bilinear"),
                                   (PipelineConfig(jpeg_partial_decode=False), "cpu", "bilinear"),
                                   (PipelineConfig(native_ops=False), "cpu", "bilinear"),
                                   (CONFIG, "cpu", "lanczos")):
        assert not partial_decode_applies(device, config, interp, None)
    ops = graph_ops(build_image_pipeline(device="cpu", batch_size=2, size=16, config=CONFIG))
    assert "DpDecodeCropResize" in ops and "DpJpegDecodable" in ops
    off = build_image_pipeline(device="cpu", batch_size=2, size=16,
                               config=PipelineConfig(jpeg_partial_decode=False))
    assert "DpDecodeCropResize" not in graph_ops(off)


MEAN, STD = (123.7, 116.3, 103.5), (58.4, 57.1, 57.4)


@pytest.mark.parametrize("layout,normalized", [("CHW", True), ("HWC", True), ("CHW", False)])
def test_the_fused_flip_and_normalisation_equal_crop_mirror_normalize(layout, normalized):
    pixels = photo_like(np.random.default_rng(7), 90, 130)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    files = [_jpeg(pixels), png.getvalue(), _jpeg(pixels, "L"), _jpeg(pixels)]
    norm = dict(mean=MEAN, std=STD) if normalized else {}
    pipe = Pipeline(batch_size=len(files), num_threads=2, device_id=None, exec_dynamic=True)
    with pipe:
        j, a, s, m = (fn.external_source(name=n) for n in "jasm")
        fused = decode_crop_resize(j, a, s, (30, 41), config=CONFIG, interpolation="bilinear",
                                   finish=Finish(m, layout, **norm))
        plain = decode_crop_resize(j, a, s, (30, 41), config=CONFIG, interpolation="bilinear")
        pipe.set_outputs(fused, Finish(m, layout, **norm).apply(plain))
    pipe.build()
    pipe.feed_input("j", [np.frombuffer(f, np.uint8) for f in files])
    pipe.feed_input("a", [np.array([3, 5], np.int32)] * len(files))
    pipe.feed_input("s", [np.array([80, 111], np.int32)] * len(files))
    pipe.feed_input("m", [np.array(i % 2, np.int32) for i in range(len(files))])
    fused, ref = (out.as_array() for out in pipe.run())
    assert fused.dtype == (np.float32 if normalized else np.uint8)
    assert fused.shape == ((4, 3, 30, 41) if layout == "CHW" else (4, 30, 41, 3))
    np.testing.assert_array_equal(fused, ref)
    assert not np.array_equal(fused[0], fused[3])  # the second JPEG was flipped


@pytest.mark.parametrize("recipe,fused", [
    (ImageRecipe(size=(16, 16)), True),
    (ImageRecipe(size=(16, 16), output=Output(memory_format="channels_last", dtype="uint8")),
     True),
    (ImageRecipe(size=(16, 16), output=Output(dtype="float16")), False),
    (ImageRecipe(size=(16, 16), crop=Crop(vflip=0.5)), False)])
def test_the_graph_fuses_the_normalisation_only_when_nothing_comes_between(recipe, fused):
    pipe = build_image_pipeline(device="cpu", batch_size=2, size=16, config=CONFIG,
                                recipe=recipe)
    last = pipe._graph_out[0].source.name
    assert ("CropMirrorNormalize" not in last) == fused, last
