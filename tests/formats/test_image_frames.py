"""Every frame of a multi-frame image counts against max_pixels: real GIF, APNG,
multi-page TIFF and animated WebP files written by Pillow, some with one frame made
larger than the header's size."""
from __future__ import annotations

import io
import struct

import pytest
from PIL import Image, features

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_frames import frame_sizes
from dali_pipes.formats.image_kind import image_size
from tests.torch_bridge.test_sample_catch_all import oversized_gif


def _frames(fmt: str, sizes, **kw) -> bytes:
    images = [Image.new("RGB", (w, h), (40 * i, 90, 200)) for i, (h, w) in enumerate(sizes)]
    out = io.BytesIO()
    images[0].save(out, format=fmt, save_all=True, append_images=images[1:], **kw)
    return out.getvalue()


def test_a_gif_frame_beyond_the_screen_counts():
    raw = oversized_gif(300)
    assert list(frame_sizes("gif", raw)) == [(300, 300)]
    with pytest.raises(FormatError, match=r"a\.gif.*pixel count.*300x300"):
        image_size(raw, "a.gif", max_pixels=300 * 300 - 1)
    assert image_size(raw, "a.gif", max_pixels=300 * 300) == ("gif", (8, 8))
    assert image_size(raw, "a.gif", max_pixels=None) == ("gif", (8, 8))


def test_every_tiff_page_counts():
    raw = _frames("TIFF", [(10, 12), (60, 50)])
    assert list(frame_sizes("tiff", raw)) == [(10, 12), (60, 50)]
    with pytest.raises(FormatError, match=r"p\.tif.*pixel count.*50x60"):
        image_size(raw, "p.tif", max_pixels=1000)
    assert image_size(raw, "p.tif", max_pixels=3000) == ("tiff", (10, 12))


def test_a_tiff_whose_ifd_chain_loops_ends():
    raw = bytearray(_frames("TIFF", [(10, 12)]))
    end = "<" if raw[:2] == b"II" else ">"
    ifd = struct.unpack(end + "I", raw[4:8])[0]
    count = struct.unpack(end + "H", raw[ifd:ifd + 2])[0]
    struct.pack_into(end + "I", raw, ifd + 2 + 12 * count, ifd)  # next IFD: itself
    assert list(frame_sizes("tiff", bytes(raw))) == [(10, 12)]


def test_every_apng_frame_counts():
    raw = _frames("PNG", [(10, 12), (10, 12)])
    assert list(frame_sizes("png", raw)) == [(10, 12), (10, 12)]
    at = raw.rindex(b"fcTL") + 4  # the last fcTL body: sequence, width, height, ...
    grown = bytearray(raw)
    struct.pack_into(">II", grown, at + 4, 4000, 3000)
    with pytest.raises(FormatError, match=r"f\.png.*pixel count.*4000x3000"):
        image_size(bytes(grown), "f.png", max_pixels=10**6)
    assert list(frame_sizes("png", _frames("PNG", [(10, 12)]))) == []


@pytest.mark.skipif(not features.check("webp"), reason="Pillow without WebP")
def test_every_animated_webp_frame_counts():
    raw = _frames("WEBP", [(10, 12), (10, 12)], lossless=True)
    assert list(frame_sizes("webp", raw)) == [(10, 12), (10, 12)]
    at = raw.rindex(b"ANMF") + 8  # the last ANMF body: x, y, width-1, height-1 (24-bit)
    grown = bytearray(raw)
    grown[at + 6:at + 12] = (3999).to_bytes(3, "little") + (2999).to_bytes(3, "little")
    with pytest.raises(FormatError, match=r"w\.webp.*pixel count.*4000x3000"):
        image_size(bytes(grown), "w.webp", max_pixels=10**6)


def test_a_gif_cut_inside_its_frames_is_a_format_error():
    raw = oversized_gif(30)
    cut = raw[:raw.index(b"\x2c\x00\x00\x00\x00") + 4] + b";"
    with pytest.raises(FormatError, match="GIF frames"):
        image_size(cut, "c.gif", max_pixels=10**6)
