"""The scan check (dali_pipes.formats.jpeg_scan) and max_pixels, on real JPEGs."""
import pytest
from PIL import Image

from dali_pipes.formats import FormatError
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.formats.jpeg_scan import jpeg_size
from tests.formats.jpeg_corruptions import (
    PIXELS,
    bomb,
    cut_with_eoi,
    encode,
    eoi_inside,
    garbage_with_ff,
    sof_inside,
    swap_restart,
)

GOOD = {
    "baseline": {}, "progressive": {"progressive": True},
    "restart rows": {"restart_marker_rows": 1},
    "restart blocks 4:4:4": {"restart_marker_blocks": 7, "subsampling": 0},
    "progressive restarts": {"progressive": True, "restart_marker_blocks": 3},
    "optimized 4:2:2": {"optimize": True, "subsampling": 1},
}


@pytest.mark.parametrize("name", GOOD)
def test_sound_files_pass(name):
    assert jpeg_size(encode(**GOOD[name])) == (75, 100)


def test_grayscale_exif_and_trailing_data_pass():
    exif = Image.Exif()
    exif[0x0112] = 6
    gray = encode(PIXELS[..., 0], exif=exif, restart_marker_blocks=5)
    assert jpeg_size(gray) == (75, 100)
    assert jpeg_size(gray + b"\0" * 100) == (75, 100)  # padding after EOI
    assert jpeg_size(gray + encode()) == (75, 100)  # a second image appended (MPF style)
    trailer = bytes(range(256)) * 8 + b"\xff\xd9" + b"moov" * 64  # e.g. an appended video
    assert jpeg_size(gray + trailer) == (75, 100)
    assert jpeg_size(gray + b"\xff\xd9" + b"\0" * 7) == (75, 100)  # EOI written twice


@pytest.mark.parametrize("make, options, field", [
    (cut_with_eoi, {"restart_marker_rows": 1}, "restart markers"),
    (cut_with_eoi, {"progressive": True, "restart_marker_blocks": 3},
     ("restart markers", "scan data")),  # the cut may land in a segment between scans
    (garbage_with_ff, {}, "scan data"),
    (garbage_with_ff, {"progressive": True}, "scan data"),
    (swap_restart, {"restart_marker_blocks": 4}, "restart markers"),
    (eoi_inside, {}, "EOI marker"),
    (sof_inside, {}, "scan data"),
    (lambda d: d[:-2], {}, "EOI marker"),
    (lambda d: d[:len(d) * 2 // 3], {"restart_marker_rows": 1}, "EOI marker"),
    (lambda d: d[:-2] + b"\xff\xd0" * 3 + b"\xff\xd9", {}, "restart markers"),
])
def test_corrupt_scans_name_file_and_field(make, options, field):
    with pytest.raises(FormatError) as info:
        jpeg_size(make(encode(**options)), "/data/cat.jpg")
    assert info.value.field in ((field,) if isinstance(field, str) else field)
    assert info.value.path == "/data/cat.jpg"
    assert "/data/cat.jpg" in str(info.value)


def test_a_restart_marker_right_before_eoi_is_tolerated():
    data = encode(restart_marker_blocks=4)
    assert jpeg_size(data[:-2] + _next_rst(data) + b"\xff\xd9") == (75, 100)


def _next_rst(data: bytes) -> bytes:
    """The restart marker that would follow the last one of `data`'s scan."""
    last = max(data.rfind(bytes([0xFF, 0xD0 + k])) for k in range(8))
    return bytes([0xFF, 0xD0 + (data[last + 1] - 0xD0 + 1) % 8])


def test_undetectable_cases_are_the_documented_ones():
    """Without restart markers, a cut-off scan that ends in FF D9 leaves no trace the cheap
    check can see (docs/failure_modes.md: only decoding finds it)."""
    assert jpeg_size(cut_with_eoi(encode())) == (75, 100)


def test_max_pixels_refuses_a_bomb_before_the_scan():
    data = bomb(30000, 30000)
    assert len(data) < 10_000
    with pytest.raises(FormatError, match=r"30000x30000 .*max_pixels") as info:
        jpeg_size(data, "/data/bomb.jpg", max_pixels=DEFAULT_MAX_PIXELS)
    assert info.value.field == "pixel count" and info.value.value == 900_000_000
    with pytest.raises(FormatError, match="pixel count"):
        jpeg_size(encode(), max_pixels=75 * 100 - 1)
    assert jpeg_size(encode(), max_pixels=75 * 100) == (75, 100)


def test_without_max_pixels_the_header_size_is_returned():
    # the claimed size makes the restart-free scan plausible to the cheap check
    assert jpeg_size(bomb(30000, 30000)) == (30000, 30000)
