"""PNGs whose colour profile libpng finds wrong load on both backends without libpng's
warnings (which name no file), with the pixels the file stores."""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch

from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.formats.png_chunks import without_profile_chunks
from torch_bridge import make_loader
from torch_bridge.modalities.image_decode import decode_rgb


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _png(seed: int) -> bytes:
    from PIL import Image
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 10, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _bad_profile() -> bytes:
    """An sRGB ICC profile whose rendering intent (header bytes 64..67) is 7, outside the
    four ICC defines: libpng warns "iCCP: ... intent outside defined range"."""
    from PIL import ImageCms
    profile = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    struct.pack_into(">I", profile, 64, 7)
    return bytes(profile)


def _with_profiles(png: bytes) -> bytes:
    """`png` with a bad iCCP chunk and an sRGB chunk of an invalid rendering intent, where
    they belong: after IHDR (8 + 25 bytes), before the image data."""
    iccp = _chunk(b"iCCP", b"bad\x00\x00" + zlib.compress(_bad_profile()))
    return png[:33] + iccp + _chunk(b"sRGB", b"\x07") + png[33:]


def _array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8).copy()


def test_the_chunks_make_libpng_warn_and_leaving_them_out_keeps_the_pixels(capfd):
    plain = _png(0)
    marked = _array(_with_profiles(plain))
    original = decode_rgb(marked)
    assert "libpng warning" in capfd.readouterr().err  # the data does trigger it
    stripped = without_profile_chunks(marked)
    assert bytes(stripped) == plain
    assert torch.equal(decode_rgb(stripped), original)
    prepared, size = prepare_image(marked, "x.png")
    assert size == (12, 10) and bytes(prepared) == plain
    decode_rgb(prepared)
    assert "libpng" not in capfd.readouterr().err


def test_other_bytes_are_returned_as_they_are():
    plain = _array(_png(1))
    assert without_profile_chunks(plain) is plain
    cut = _array(_with_profiles(_png(1))[:40])  # the iCCP chunk runs past the end
    assert without_profile_chunks(cut) is cut
    jpeg = _array(b"\xff\xd8\xff\xe0" + bytes(20))
    assert without_profile_chunks(jpeg) is jpeg


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_loader_over_such_pngs_prints_nothing(tmp_path, capfd, backend):
    for k in range(4):
        folder = tmp_path / f"class_{k % 2}"
        folder.mkdir(exist_ok=True)
        (folder / f"p{k}.png").write_bytes(_with_profiles(_png(k)))
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    loader = make_loader("image", tmp_path, backend=backend, batch_size=2, size=8,
                         train=False, shuffle=False, **extra)
    capfd.readouterr()
    batches = [b for _ in range(2) for b in loader]
    assert len(batches) == 4
    assert "libpng" not in capfd.readouterr().err
