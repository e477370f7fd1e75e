import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.formats.jpeg_scan import jpeg_size
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like


@pytest.fixture(scope="module")
def good() -> bytes:
    return encode_jpeg(photo_like(np.random.default_rng(0), 45, 70))


def test_size_from_bytes_and_numpy(good):
    assert jpeg_size(good) == (45, 70)
    assert jpeg_size(np.frombuffer(good, np.uint8)) == (45, 70)


def test_progressive_and_exif(tmp_path):
    from PIL import Image
    img = Image.fromarray(photo_like(np.random.default_rng(1), 33, 51))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation
    path = tmp_path / "p.jpg"
    img.save(path, progressive=True, exif=exif)
    assert jpeg_size(path.read_bytes(), path) == (33, 51)


def _corrupt_sof_length(data: bytes) -> bytes:
    out = bytearray(data)
    out[out.index(b"\xff\xc0") + 9] = 2
    return bytes(out)


@pytest.mark.parametrize("make,field", [
    (lambda g: b"", "file size"),
    (lambda g: b"hello, world", "SOI marker"),
    (lambda g: b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "SOI marker"),
    (lambda g: g[:len(g) // 2], "EOI marker"),
    (lambda g: g[:40], "length"),
    (lambda g: g[:2], "SOS marker"),
    (_corrupt_sof_length, "SOF length"),
])
def test_bad_files_name_file_and_field(good, make, field):
    with pytest.raises(FormatError, match=field) as info:
        jpeg_size(make(good), "/data/x.jpg")
    assert "/data/x.jpg" in str(info.value)
    assert info.value.field.endswith(field) or field in info.value.field
