"""Image formats recognised from their bytes, sizes from headers, and decoded the same way by
both backends: the same pixels stored as PNG (8/16-bit, gray, alpha, palette), BMP, TIFF,
lossless WebP and GIF load to the same batch images."""
from __future__ import annotations

import io
import re

import numpy as np
import pytest
import torch
from PIL import Image

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_kind import image_kind, image_size, prepare_image

H, W = 37, 53


def _gray() -> np.ndarray:
    y, x = np.mgrid[:H, :W]
    return ((x * 5 + y * 3) % 256).astype(np.uint8)


def _encode(image: Image.Image, fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kw)
    return out.getvalue()


def _same_pixels() -> dict[str, bytes]:
    """One gray picture in every lossless variant (names: file names)."""
    g = _gray()
    rgb = Image.fromarray(np.stack([g] * 3, -1))
    rgba = Image.fromarray(np.dstack([np.stack([g] * 3, -1), (g * 7).astype(np.uint8)]))
    return {"rgb.png": _encode(rgb, "PNG"), "rgba.png": _encode(rgba, "PNG"),
            "gray.png": _encode(Image.fromarray(g), "PNG"),
            "gray16.png": _encode(Image.fromarray(g.astype(np.uint16) * 257), "PNG"),
            "palette.png": _encode(Image.fromarray(g).convert("P"), "PNG"),
            "pic.bmp": _encode(rgb, "BMP"), "pic.tiff": _encode(rgb, "TIFF"),
            "pic.webp": _encode(rgb, "WEBP", lossless=True),
            "pic.gif": _encode(Image.fromarray(g).convert("P"), "GIF")}


@pytest.mark.parametrize("name", sorted(_same_pixels()))
def test_kind_and_size_come_from_the_header(name):
    data = np.frombuffer(_same_pixels()[name], np.uint8)
    kind = {"png": "png", "bmp": "bmp", "tiff": "tiff", "webp": "webp", "gif": "gif"}[
        name.rsplit(".", 1)[1]]
    assert image_kind(data) == kind
    assert image_size(data, name) == (kind, (H, W))


def test_more_header_variants():
    rgb = Image.fromarray(np.stack([_gray()] * 3, -1))
    for data in (_encode(rgb, "WEBP", quality=80), _encode(rgb.convert("RGBA"), "WEBP"),
                 _encode(rgb, "TIFF", compression="tiff_deflate"), _encode(rgb, "JPEG"),
                 _encode(rgb.convert("CMYK"), "JPEG"), _encode(rgb.convert("L"), "JPEG")):
        assert image_size(np.frombuffer(data, np.uint8))[1] == (H, W)


@pytest.mark.parametrize("name", ["rgb.png", "pic.gif", "pic.bmp", "pic.webp"])
def test_truncated_files_are_named(name):
    data = _same_pixels()[name]
    with pytest.raises(FormatError, match=rf"^{re.escape(name)}: .*truncated"):
        image_size(np.frombuffer(data[:len(data) // 2], np.uint8), name)


def test_bytes_of_no_image_format_name_the_file_and_what_was_found():
    with pytest.raises(FormatError, match=r"notes\.png: magic bytes: not an image "
                                          r"\(first bytes b'hello th'\)"):
        image_size(np.frombuffer(b"hello there", np.uint8), "notes.png")
    with pytest.raises(FormatError, match="empty file"):
        image_size(np.zeros(0, np.uint8), "empty.jpg")


def test_gif_becomes_its_first_frame_as_png():
    frames = [Image.fromarray(np.full((H, W), v, np.uint8)).convert("P") for v in (10, 200)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    data, size = prepare_image(np.frombuffer(out.getvalue(), np.uint8), "anim.gif")
    assert size == (H, W) and image_kind(data) == "png"
    assert np.asarray(Image.open(io.BytesIO(data.tobytes())))[..., 0].max() == 10


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    """class_a: every variant (some in sub-folders); class_b: nested JPEG + a fake PNG."""
    root = tmp_path_factory.mktemp("mixed")
    for i, (name, data) in enumerate(sorted(_same_pixels().items())):
        folder = root / "class_a" / ("sub" if i % 2 else "") / ("deeper" if i % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    deep = root / "class_b" / "x" / "y"
    deep.mkdir(parents=True)
    (deep / "photo.jpg").write_bytes(_encode(Image.fromarray(_gray()), "JPEG"))
    (root / "class_b" / "fake.png").write_text("not a picture")
    return root


def test_every_format_loads_to_the_same_image_on_both_backends(mixed_folder):
    from torch_bridge import make_loader
    out = {}
    for backend in ("dali", "torch"):
        loader = make_loader("image", mixed_folder, backend=backend, batch_size=16, size=24,
                             train=False, shuffle=False, on_error="skip",
                             **({"reference": {"num_workers": 0}} if backend == "torch" else {}))
        batch = next(iter(loader))
        source = loader._engine.modality.source
        assert [s.path for s in loader.skipped] == [str(mixed_folder / "class_b" / "fake.png")]
        assert "not an image" in loader.skipped[0].reason
        names = [source.path(i).rsplit("/", 1)[1] for i in batch["index"].tolist()]
        assert batch["label"].tolist() == [0] * 9 + [1]
        out[backend] = dict(zip(names, batch["image"], strict=True))
    for backend, images in out.items():
        want = images["rgb.png"]
        for name in _same_pixels():
            assert torch.equal(images[name], want), (backend, name)
    diff = (out["dali"]["rgb.png"] - out["torch"]["rgb.png"]).abs().mean().item()
    assert diff <= 0.05, diff
    assert (out["dali"]["photo.jpg"] - out["dali"]["rgb.png"]).abs().mean().item() <= 0.05


def _jpeg2000(**kw) -> bytes:
    """A real JPEG 2000 file written by Pillow (OpenJPEG): .jp2 boxes, or with
    no_jp2=True a raw J2K codestream."""
    return _encode(Image.fromarray(np.stack([_gray()] * 3, -1)), "JPEG2000", **kw)


@pytest.mark.parametrize("kw,kind", [({}, "jp2"), ({"no_jp2": True}, "j2k"),
                                     ({"irreversible": True, "quality_layers": [20]}, "jp2")])
def test_jpeg2000_kind_and_size_come_from_the_header(kw, kind):
    data = np.frombuffer(_jpeg2000(**kw), np.uint8)
    assert image_kind(data) == kind
    assert image_size(data, "pic") == (kind, (H, W))
    assert prepare_image(data, "pic")[1] == (H, W)


def test_j2k_size_subtracts_the_image_offset():
    data = np.frombuffer(_jpeg2000(no_jp2=True, offset=(3, 5), tile_size=(32, 32)), np.uint8)
    assert Image.open(io.BytesIO(data.tobytes())).size == (W, H)
    assert image_size(data, "pic.j2k") == ("j2k", (H, W))


def test_jpeg2000_over_max_pixels_is_refused_from_the_header():
    with pytest.raises(FormatError, match=r"^big\.jp2: .*pixels"):
        image_size(np.frombuffer(_jpeg2000(), np.uint8), "big.jp2", max_pixels=H * W - 1)


@pytest.mark.parametrize("kw,cut,match", [
    ({}, 0.5, r"JP2 box b'jp2c': truncated"),
    ({}, 40, r"JP2 .*box"),                  # inside the header boxes
    ({"no_jp2": True}, 0.5, r"J2K codestream: truncated: no EOC"),
    ({"no_jp2": True}, 10, r"J2K SIZ marker: truncated")])
def test_truncated_jpeg2000_names_the_file_and_the_field(kw, cut, match):
    data = _jpeg2000(**kw)
    end = int(len(data) * cut) if isinstance(cut, float) else cut
    with pytest.raises(FormatError, match=rf"^scan\.jp2: {match}"):
        image_size(np.frombuffer(data[:end], np.uint8), "scan.jp2")


def test_jp2_without_header_or_codestream_box_names_the_box():
    data = _jpeg2000()
    with pytest.raises(FormatError, match=r"^x\.jp2: JP2 ihdr box"):
        image_size(np.frombuffer(data.replace(b"ihdr", b"ihdX", 1), np.uint8), "x.jp2")
    with pytest.raises(FormatError, match=r"^x\.jp2: JP2 jp2h box"):
        image_size(np.frombuffer(data.replace(b"jp2h", b"jp2X", 1), np.uint8), "x.jp2")
    with pytest.raises(FormatError, match=r"^x\.jp2: JP2 jp2c box"):
        image_size(np.frombuffer(data.replace(b"jp2c", b"jp2X", 1), np.uint8), "x.jp2")


def test_gif_with_a_transparent_colour_becomes_an_rgba_png():
    image = Image.fromarray(_gray()).convert("P")
    data, size = prepare_image(np.frombuffer(_encode(image, "GIF", transparency=0), np.uint8))
    assert size == (H, W) and Image.open(io.BytesIO(data.tobytes())).mode == "RGBA"


@pytest.mark.parametrize("mode,kw,converted", [
    ("RGB", {}, False), ("RGBA", {}, False), ("L", {}, False), ("LA", {}, True),
    ("RGB", {"no_jp2": True}, False), ("RGBA", {"no_jp2": True}, False),
    ("L", {"no_jp2": True}, True), ("LA", {"no_jp2": True}, True)])
def test_jpeg2000_that_dalis_cpu_decoder_refuses_becomes_a_lossless_png(mode, kw, converted):
    """DALI 2.4's CPU decoder fails on raw one-component codestreams and on gray + alpha
    (checked on the mixed folder in tests/sources/test_image_source.py); those files reach
    both backends as PNGs of the same pixels, the others as they are."""
    rgba = np.dstack([np.stack([_gray()] * 3, -1), 255 - _gray()])
    image = Image.fromarray(rgba, "RGBA").convert(mode)
    data = np.frombuffer(_encode(image, "JPEG2000", **kw), np.uint8)
    out, size = prepare_image(data, "pic")
    assert size == (H, W) and (image_kind(out) == "png") == converted
    decoded = Image.open(io.BytesIO(out.tobytes()))
    assert decoded.mode == mode and np.array_equal(np.asarray(decoded), np.asarray(image))


def test_16_bit_gray_tiff_and_jpeg2000_load_by_their_high_byte_on_both_backends(tmp_path):
    from torch_bridge import make_loader
    (tmp_path / "c").mkdir()
    gray16 = Image.fromarray(_gray().astype(np.uint16) * 257)
    gray16.save(tmp_path / "c" / "a.tiff")
    gray16.save(tmp_path / "c" / "b.jp2")
    gray16.save(tmp_path / "c" / "c.j2k", "JPEG2000", no_jp2=True)
    Image.fromarray(_gray()).save(tmp_path / "c" / "d.png")  # the same picture, 8-bit
    for backend in ("dali", "torch"):
        extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
        loader = make_loader("image", tmp_path, backend=backend, batch_size=4, size=24,
                             train=False, shuffle=False, dtype="uint8", **extra)
        images = next(iter(loader))["image"]
        for i in range(3):
            assert torch.equal(images[i], images[3]), (backend, i)
