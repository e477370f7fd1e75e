"""ENVI reader: value-for-value against Spectral Python's writer, metadata, lookup, bad input."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dali_pipes.formats import FormatError, open_envi
from dali_pipes.formats.envi import ENVI_DTYPES

envi = pytest.importorskip("spectral.io.envi")

INTERLEAVES = ("bsq", "bil", "bip")
DTYPES = [np.dtype(d) for d in ENVI_DTYPES.values()]
BANDS, LINES, SAMPLES = 5, 7, 6


def _image(dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """(lines, samples, bands) test values that fit every dtype, with distinct entries."""
    rng = np.random.default_rng(seed)
    values = rng.permutation(LINES * SAMPLES * BANDS).reshape(LINES, SAMPLES, BANDS) + 1
    if dtype.kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    if dtype.kind == "f":
        return (values / 7.0).astype(dtype)
    return (values % 250).astype(dtype)


def _save(tmp_path, image, name="cube", **kwargs) -> str:
    header = os.path.join(tmp_path, f"{name}.hdr")
    envi.save_image(header, image, force=True, **kwargs)
    return header


@pytest.mark.parametrize("byteorder", [0, 1])
@pytest.mark.parametrize("interleave", INTERLEAVES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_spectral(tmp_path, dtype, interleave, byteorder):
    image = _image(dtype)
    header = _save(tmp_path, image, dtype=dtype, interleave=interleave, byteorder=byteorder)
    expected = np.transpose(image, (2, 0, 1))  # (bands, lines, samples)
    with open_envi(header) as cube:
        assert cube.shape == (BANDS, LINES, SAMPLES)
        assert cube.interleave == interleave and cube.dtype == dtype and cube.dtype.isnative
        for b in range(BANDS):
            band = cube.read_band(b)
            assert band.dtype == dtype and band.dtype.isnative and band.flags.c_contiguous
            np.testing.assert_array_equal(band, expected[b])
        np.testing.assert_array_equal(cube.read_patch(0, 0, LINES, SAMPLES), expected)
        patch = cube.read_patch(2, 1, 4, 3, bands=[4, 0, 2])
        assert patch.shape == (3, 4, 3) and patch.dtype.isnative
        np.testing.assert_array_equal(patch, expected[[4, 0, 2], 2:6, 1:4])


@pytest.mark.parametrize("interleave", INTERLEAVES)
def test_patch_band_selections(tmp_path, interleave):
    image = _image(np.dtype("u2"), seed=3)
    header = _save(tmp_path, image, interleave=interleave, byteorder=1)
    expected = np.transpose(image, (2, 0, 1))
    with open_envi(header) as cube:
        for bands in ([1], (3, 1), np.array([0, 4]), range(1, 4), [2, 2]):
            got = cube.read_patch(LINES - 2, SAMPLES - 3, 2, 3, bands=bands)
            np.testing.assert_array_equal(got, expected[list(bands), LINES - 2:, SAMPLES - 3:])


def test_reads_are_independent_copies(tmp_path):
    header = _save(tmp_path, _image(np.dtype("f4")), interleave="bsq")
    cube = open_envi(header)
    band, patch = cube.read_band(0), cube.read_patch(0, 0, 2, 2)
    band[:] = 0
    patch[:] = 0
    assert cube.read_band(0).any() and cube.read_patch(0, 0, 2, 2).any()
    cube.close()
    assert band.base is None or not isinstance(band.base, np.memmap)
    with pytest.raises(ValueError, match="closed"):
        cube.read_band(0)


def test_metadata(tmp_path):
    wavelengths = [400.5, 500.0, 600.25, 700.0, 800.0]
    metadata = {"wavelength": wavelengths, "wavelength units": "Nanometers",
                "fwhm": [10.0] * BANDS, "bbl": [1, 1, 0, 1, 1],
                "band names": ["b0", "b1", "b2", "b3", "b4"], "data ignore value": -1,
                "reflectance scale factor": 10000, "description": "two\nlines"}
    header = _save(tmp_path, _image(np.dtype("i2")), metadata=metadata)
    cube = open_envi(header)
    np.testing.assert_array_equal(cube.wavelengths, wavelengths)
    assert cube.wavelengths.dtype == np.float64
    h = cube.header
    assert h.wavelength_units == "Nanometers" and h.band_names == ("b0", "b1", "b2", "b3", "b4")
    np.testing.assert_array_equal(h.fwhm, 10.0)
    assert h.bbl.tolist() == [True, True, False, True, True]
    assert h.data_ignore_value == -1 and h.reflectance_scale_factor == 10000
    assert h.description == "two\nlines" and h.header_offset == 0
    assert not cube.wavelengths.flags.writeable
    assert pickle.loads(pickle.dumps(cube)).read_band(1).tolist() == cube.read_band(1).tolist()


def test_no_wavelengths(tmp_path):
    assert open_envi(_save(tmp_path, _image(np.dtype("u1")))).wavelengths is None


HEADER = """ENVI
; a comment line
Description = {
  spans, several
  lines }
SAMPLES = 4
lines   = 3
bands = 2
header offset = {offset}
Data Type = 12
interleave = BIL
byte order = 1
wavelength = {
 450.0, 550.0 }
"""


def _handmade(tmp_path, data_name="x.img", header_name="x.hdr", offset=16, text=HEADER):
    values = np.arange(2 * 3 * 4, dtype=">u2").reshape(3, 2, 4)  # bil: (lines, bands, samples)
    (tmp_path / header_name).write_text(text.replace("{offset}", str(offset)))
    (tmp_path / data_name).write_bytes(b"\xab" * offset + values.tobytes())
    return values.transpose(1, 0, 2)


def test_handmade_header_offset_case_and_comments(tmp_path):
    expected = _handmade(tmp_path)
    cube = open_envi(tmp_path / "x.hdr")
    assert cube.interleave == "bil" and cube.header.header_offset == 16
    assert cube.header.description == "spans, several\nlines"
    np.testing.assert_array_equal(cube.read_patch(0, 0, 3, 4), expected)
    np.testing.assert_array_equal(cube.wavelengths, [450.0, 550.0])


@pytest.mark.parametrize("data_name", ["x", "x.img", "x.DAT", "x.raw", "x.bin", "x.BIL", "x.bsq"])
def test_data_file_lookup_from_header(tmp_path, data_name):
    expected = _handmade(tmp_path, data_name=data_name)
    cube = open_envi(tmp_path / "x.hdr")
    assert os.path.basename(cube.data_path) == data_name
    np.testing.assert_array_equal(cube.read_band(1), expected[1])


@pytest.mark.parametrize("header_name", ["x.hdr", "x.img.hdr", "x.HDR"])
def test_lookup_from_data_file(tmp_path, header_name):
    expected = _handmade(tmp_path, header_name=header_name)
    cube = open_envi(tmp_path / "x.img")
    assert os.path.basename(cube.path) == header_name
    np.testing.assert_array_equal(cube.read_band(0), expected[0])
    if header_name == "x.img.hdr":
        assert open_envi(tmp_path / "x.img.hdr").data_path.endswith("x.img")


def _error(path) -> FormatError:
    with pytest.raises(FormatError) as info:
        open_envi(path)
    return info.value


@pytest.mark.parametrize("key", ["samples", "lines", "bands", "data type", "interleave",
                                 "byte order"])
def test_missing_required_key(tmp_path, key):
    text = "\n".join(line for line in HEADER.splitlines() if not line.lower().startswith(key))
    _handmade(tmp_path, text=text + "\n")
    err = _error(tmp_path / "x.hdr")
    assert err.field == key and key in str(err) and "x.hdr" in str(err)


@pytest.mark.parametrize("old,new,field", [
    ("Data Type = 12", "Data Type = 7", "data type"),
    ("interleave = BIL", "interleave = bxq", "interleave"),
    ("byte order = 1", "byte order = 2", "byte order"),
    ("SAMPLES = 4", "SAMPLES = four", "samples"),
    ("bands = 2", "bands = 0", "bands"),
    (" 450.0, 550.0 }", " 450.0, 550.0, 650.0 }", "wavelength"),
    (" 450.0, 550.0 }", " 450.0, oops }", "wavelength"),
    ("ENVI\n", "ENVY\n", "first line"),
])
def test_malformed_header(tmp_path, old, new, field):
    assert old in HEADER
    _handmade(tmp_path, text=HEADER.replace(old, new))
    err = _error(tmp_path / "x.hdr")
    assert err.field == field and field in str(err) and "x.hdr" in str(err)


def test_unclosed_brace(tmp_path):
    _handmade(tmp_path, text=HEADER.replace(" 450.0, 550.0 }", " 450.0, 550.0"))
    assert _error(tmp_path / "x.hdr").field == "wavelength"


@pytest.mark.parametrize("delta", [-1, -48, 1, 100])
def test_wrong_data_size(tmp_path, delta):
    _handmade(tmp_path)
    data = tmp_path / "x.img"
    raw = data.read_bytes()
    data.write_bytes(raw[:delta] if delta < 0 else raw + b"\0" * delta)
    err = _error(tmp_path / "x.hdr")
    assert err.field == "data size" and "x.img" in str(err)
    assert err.expected == f"{len(raw)} bytes" and err.value == f"{len(raw) + delta} bytes"
    assert data.stat().st_size == len(raw) + delta  # never extended or modified


def test_missing_files(tmp_path):
    _handmade(tmp_path, data_name="y.img")
    err = _error(tmp_path / "x.hdr")
    assert err.field == "data file" and "x.hdr" in str(err)
    err = _error(tmp_path / "y.img")
    assert err.field == "header" and "y.img" in str(err)
    assert _error(tmp_path / "nothing.hdr").field == "header"


def test_read_argument_errors(tmp_path):
    cube = open_envi(_save(tmp_path, _image(np.dtype("f8")), interleave="bip"))
    with pytest.raises(IndexError, match="b="):
        cube.read_band(BANDS)
    with pytest.raises(IndexError, match="y="):
        cube.read_patch(-1, 0, 1, 1)
    with pytest.raises(IndexError, match="exceeds"):
        cube.read_patch(0, SAMPLES - 1, 1, 2)
    with pytest.raises(ValueError, match="h must"):
        cube.read_patch(0, 0, 0, 1)
    with pytest.raises(IndexError, match=r"bands\[1\]"):
        cube.read_patch(0, 0, 1, 1, bands=[0, BANDS])
    with pytest.raises(ValueError, match="empty"):
        cube.read_patch(0, 0, 1, 1, bands=[])
    with pytest.raises(TypeError, match="bands"):
        cube.read_patch(0, 0, 1, 1, bands=3)


_LAYOUT_AXES = {"bsq": "BLS", "bil": "LBS", "bip": "LSB"}


def _end_of_read(interleave: str, itemsize: int, bands, y: int, x: int, h: int, w: int) -> int:
    """One past the last byte a patch read touches, by brute force over the file's layout."""
    sizes = {"B": BANDS, "L": LINES, "S": SAMPLES}
    wanted = {"B": list(bands), "L": list(range(y, y + h)), "S": list(range(x, x + w))}
    axes = _LAYOUT_AXES[interleave]
    flat = np.arange(BANDS * LINES * SAMPLES).reshape([sizes[a] for a in axes])
    return (int(flat[np.ix_(*[wanted[a] for a in axes])].max()) + 1) * itemsize


@pytest.mark.parametrize("interleave", INTERLEAVES)
@pytest.mark.parametrize("y,x,h,w,bands", [
    (0, 0, 1, 1, [0]), (LINES - 1, SAMPLES - 1, 1, 1, None), (2, 1, 4, 3, [4, 0, 2]),
    (0, 0, LINES, SAMPLES, [1]), (3, 2, 2, 2, [2, 3])])
def test_file_truncated_after_open_fails_exactly_past_the_bytes_a_read_needs(
        tmp_path, interleave, y, x, h, w, bands):
    image = _image(np.dtype("i2"), seed=5)
    header = _save(tmp_path, image, interleave=interleave)
    data = tmp_path / "cube.img"
    full = data.read_bytes()
    expected = np.transpose(image, (2, 0, 1))[bands if bands is not None else slice(None),
                                              y:y + h, x:x + w]
    end = _end_of_read(interleave, 2, range(BANDS) if bands is None else bands, y, x, h, w)
    with open_envi(header) as cube:
        os.truncate(data, end)  # everything the read needs is still there
        np.testing.assert_array_equal(cube.read_patch(y, x, h, w, bands=bands), expected)
        os.truncate(data, end - 1)  # its last byte is gone
        with pytest.raises(FormatError) as info:
            cube.read_patch(y, x, h, w, bands=bands)
        assert info.value.path == str(data) and info.value.field == "data size"
        assert info.value.value == f"{end - 1} bytes" and info.value.expected == f">= {end} bytes"
        data.write_bytes(full)  # the same file again: reads work again
        np.testing.assert_array_equal(cube.read_patch(y, x, h, w, bands=bands), expected)


def test_file_truncated_after_open_raises_instead_of_sigbus(tmp_path):
    """Pages past a truncated file's end fault (SIGBUS) when touched; the size check comes
    first. The cube spans many pages, so without the check this test kills the process."""
    image = np.arange(64 * 64 * 16, dtype=np.int16).reshape(64, 64, 16)
    header = _save(tmp_path, image, interleave="bsq")
    with open_envi(header) as cube:
        os.truncate(tmp_path / "cube.img", 4096)
        np.testing.assert_array_equal(cube.read_patch(0, 0, 2, 2, bands=[0]),
                                      image[:2, :2, :1].transpose(2, 0, 1))
        with pytest.raises(FormatError, match=r"cube\.img: data size: file was truncated"):
            cube.read_band(15)
        with pytest.raises(FormatError, match="data size"):
            cube.read_patch(60, 60, 4, 4)
