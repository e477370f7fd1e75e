"""`.npy` headers: real files written by numpy, good and broken, checked field by field."""
from __future__ import annotations

import io

import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.formats.npy import check_like, header_length, parse_header


def _bytes(array, version=None) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, version=version, allow_pickle=True)
    return out.getvalue()


def _parse(data: bytes):
    return parse_header(data, "f.npy", len(data))


@pytest.mark.parametrize("version", [None, (1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int16", "uint8"])
def test_good_headers_give_shape_dtype_and_where_rows_start(version, dtype):
    array = (np.arange(21).reshape(7, 3) * 3).astype(dtype)
    data = _bytes(array, version)
    header = _parse(data)
    assert header.shape == (7, 3) and header.dtype == np.dtype(dtype)
    assert header.offset == header_length(data[:12], "f.npy") == len(data) - array.nbytes
    rows = np.frombuffer(data[header.offset:], dtype).reshape(7, 3)
    assert np.array_equal(rows, array)


@pytest.mark.parametrize("array, field, match", [
    (np.zeros((4, 2), np.float64), "dtype", "unsupported element type"),
    (np.zeros((4, 2), ">f4"), "dtype", "unsupported element type"),
    (np.array([[None, 1]], dtype=object), "dtype", "object arrays"),
    (np.asfortranarray(np.zeros((4, 2), np.float32)), "fortran_order", "Fortran"),
    (np.zeros(4, np.float32), "shape", "2-d"),
    (np.zeros((2, 3, 4), np.float32), "shape", "2-d"),
    (np.zeros((0, 3), np.float32), "shape", "T, C >= 1"),
    (np.zeros((3, 0), np.float32), "shape", "T, C >= 1"),
])
def test_bad_arrays_name_the_file_and_the_field(array, field, match):
    with pytest.raises(FormatError, match=rf"f\.npy: {field}: .*{match}") as info:
        _parse(_bytes(array))
    assert info.value.field == field and info.value.path == "f.npy"


def test_bad_magic_unknown_version_and_garbage_header():
    data = _bytes(np.zeros((4, 2), np.float32))
    with pytest.raises(FormatError, match="f.npy: magic: not a NumPy"):
        _parse(b"PK\x03\x04" + data[4:])
    with pytest.raises(FormatError, match="f.npy: magic"):
        _parse(b"\x93NUM")
    with pytest.raises(FormatError, match="f.npy: header: unknown .npy format version"):
        _parse(data[:6] + b"\x07\x00" + data[8:])
    broken = data.replace(b"'descr'", b"'dexcr'")
    with pytest.raises(FormatError, match="f.npy: header: cannot be parsed"):
        _parse(broken)


def test_a_file_cut_inside_its_header_or_rows():
    data = _bytes(np.ones((5, 2), np.float32))
    with pytest.raises(FormatError, match="f.npy: header: the file ends inside its header"):
        _parse(data[:50])
    with pytest.raises(FormatError, match=r"f.npy: data size: .*found 160.*expected 168"):
        parse_header(data[:160], "f.npy", 160)


def test_check_like_names_channel_count_and_dtype():
    header = _parse(_bytes(np.zeros((4, 2), np.int16)))
    check_like(header, "f.npy", 2, np.dtype("int16"))
    with pytest.raises(FormatError, match=r"f.npy: shape: channel count .*\(T, 3\)"):
        check_like(header, "f.npy", 3, np.dtype("int16"))
    with pytest.raises(FormatError, match="f.npy: dtype: element type differs"):
        check_like(header, "f.npy", 2, np.dtype("float32"))
