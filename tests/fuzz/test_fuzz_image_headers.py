"""Property-based fuzzing of the image header readers added for JPEG 2000 and EXIF: mutated
.jp2 / J2K files written by Pillow make `image_size` raise FormatError or return a size,
nothing else, and `exif_orientation` on mutated JPEG/PNG/WebP/TIFF files always returns a
value in 1-8. Derandomized; `FUZZ_EXAMPLES=5000` searches deeper."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from dali_pipes.formats import FormatError
from dali_pipes.formats.exif import exif_orientation
from dali_pipes.formats.image_kind import image_size

_DEEP = int(os.environ.get("FUZZ_EXAMPLES", 0))
FUZZ = settings(max_examples=_DEEP or 150, deadline=None, derandomize=not _DEEP,
                suppress_health_check=[HealthCheck.too_slow])


def _file(fmt: str, **kw) -> bytes:
    y, x = np.mgrid[:9, :13]
    out = io.BytesIO()
    if fmt != "JPEG2000":
        exif = Image.Exif()
        exif[0x0112] = 6
        kw["exif"] = exif.tobytes()
    Image.fromarray(np.stack([x * 9, y * 20, x + y], -1).astype(np.uint8)).save(out, fmt, **kw)
    return out.getvalue()


TEMPLATES = {"jp2": _file("JPEG2000"), "j2k": _file("JPEG2000", no_jp2=True),
             "jpeg": _file("JPEG"), "png": _file("PNG"), "webp": _file("WEBP", lossless=True),
             "tiff": _file("TIFF")}
edits = st.lists(st.tuples(st.integers(0, 4096), st.integers(0, 8), st.binary(max_size=8)),
                 min_size=1, max_size=4)


def _mutate(data: bytes, ops, keep_magic: int) -> bytes:
    for pos, length, new in ops:
        pos = keep_magic + pos % (len(data) - keep_magic + 1)
        data = data[:pos] + new + data[pos + length:]
    return data


@pytest.mark.parametrize("kind", ["jp2", "j2k"])
@FUZZ
@given(ops=edits, cut=st.one_of(st.none(), st.integers(0, 400)))
def test_mutated_jpeg2000_raises_only_format_error(kind, ops, cut):
    data = _mutate(TEMPLATES[kind], ops, 12 if kind == "jp2" else 4)
    data = data if cut is None else data[:cut]
    try:
        got, (h, w) = image_size(np.frombuffer(data, np.uint8), "fuzz")
    except FormatError as exc:
        assert str(exc).startswith("fuzz: ")
        return
    assert got == kind and h > 0 and w > 0


@pytest.mark.parametrize("kind", ["jpeg", "png", "webp", "tiff"])
@FUZZ
@given(ops=edits)
def test_mutated_exif_gives_an_orientation_in_1_to_8(kind, ops):
    data = _mutate(TEMPLATES[kind], ops, 4)
    assert exif_orientation(data) in range(1, 9)
