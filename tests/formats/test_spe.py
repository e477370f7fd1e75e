"""SPE reader: round trips through the writer (2.x and 3.0), layout details, bad input."""
from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest

from dali_pipes.formats import FormatError, open_spe
from dali_pipes.formats._spe_writer import write_spe

F, Y, X = 4, 3, 5


def _frames(dtype, seed=0) -> np.ndarray:
    values = np.random.default_rng(seed).permutation(F * Y * X).reshape(F, Y, X) + 1
    return (values / 4.0 if np.dtype(dtype).kind == "f" else values).astype(dtype)


def _patch(path, offset: int, fmt: str, value) -> None:
    raw = bytearray(path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("version", [2.2, 2.5])
@pytest.mark.parametrize("dtype", ["f4", "i4", "i2", "u2", "f8", "u1", "u4"])
def test_round_trip_v2(tmp_path, version, dtype):
    frames = _frames(dtype)
    path = write_spe(tmp_path / "a.spe", frames, version=version)
    with open_spe(path) as spe:
        assert spe.shape == (F, Y, X) and spe.version == pytest.approx(version)
        assert spe.dtype == np.dtype(dtype) and spe.dtype.isnative and spe.wavelengths is None
        for i in range(F):
            np.testing.assert_array_equal(spe.read_frame(i), frames[i])
        np.testing.assert_array_equal(spe.read_frames(1, 3), frames[1:3])


@pytest.mark.parametrize("meta", [0, 8, 24])
@pytest.mark.parametrize("dtype", ["u2", "u4", "f4"])
def test_round_trip_v3(tmp_path, dtype, meta):
    frames, wavelengths = _frames(dtype), np.linspace(500.0, 600.0, X) + 1e-9
    path = write_spe(tmp_path / "a.spe", frames, wavelengths=wavelengths,
                     metadata_bytes_per_frame=meta)
    spe = open_spe(path)
    assert spe.version == 3.0 and spe.shape == (F, Y, X) and spe.dtype == np.dtype(dtype)
    assert spe.layout.frame_stride == Y * X * np.dtype(dtype).itemsize + meta
    np.testing.assert_array_equal(spe.wavelengths, wavelengths)  # exact through the XML
    for i in range(F):
        frame = spe.read_frame(i)
        assert frame.dtype.isnative and frame.flags.c_contiguous and frame.flags.owndata
        np.testing.assert_array_equal(frame, frames[i])
    np.testing.assert_array_equal(spe.read_frames(0, F), frames)
    assert pickle.loads(pickle.dumps(spe)).read_frame(F - 1).tolist() == frames[-1].tolist()
    spe.close()
    with pytest.raises(ValueError, match="closed"):
        spe.read_frame(0)


def test_metadata_is_not_read_as_pixels(tmp_path):
    frames = np.zeros((F, Y, X), np.uint16)
    spe = open_spe(write_spe(tmp_path / "a.spe", frames, metadata_bytes_per_frame=8))
    assert all(not spe.read_frame(i).any() for i in range(F))  # timestamps are non-zero


def test_v2_calibration_polynomial(tmp_path):
    coeff = [400.0, 0.5, 1e-3]
    spe = open_spe(write_spe(tmp_path / "a.spe", _frames("u2"), version=2.5, polynomial=coeff))
    pixel = np.arange(1, X + 1)  # WinSpec numbers pixels from 1
    np.testing.assert_allclose(spe.wavelengths, 400.0 + 0.5 * pixel + 1e-3 * pixel**2)


def test_v3_wavelengths_of_whole_sensor_are_sliced(tmp_path):
    sensor = np.arange(100.0, 120.0)
    spe = open_spe(write_spe(tmp_path / "a.spe", _frames("u2"), wavelengths=sensor, sensor_x=7))
    np.testing.assert_array_equal(spe.wavelengths, sensor[7:7 + X])


def test_xml_frame_count_preferred(tmp_path):
    path = tmp_path / "a.spe"
    write_spe(path, _frames("u2"))
    _patch(path, 1446, "<i", 1)  # the binary header says one frame, the XML footer four
    spe = open_spe(path)
    assert spe.header.num_frames == 1 and spe.shape[0] == F
    np.testing.assert_array_equal(spe.read_frame(F - 1), _frames("u2")[F - 1])


def _error(path) -> FormatError:
    with pytest.raises(FormatError) as info:
        open_spe(path)
    assert str(path) in str(info.value)
    return info.value


def test_short_file(tmp_path):
    (tmp_path / "a.spe").write_bytes(b"\0" * 4000)
    assert _error(tmp_path / "a.spe").field == "header"


@pytest.mark.parametrize("offset,fmt,value,field", [
    (108, "<h", 4, "datatype"), (108, "<h", 99, "datatype"), (42, "<H", 0, "xdim"),
    (656, "<H", 0, "ydim"), (1446, "<i", 0, "NumFrames"), (1510, "<h", 2, "NumROI"),
    (1446, "<i", F + 1, "data size"), (3101, "<B", 9, "polynom_order_x"),
])
def test_malformed_v2(tmp_path, offset, fmt, value, field):
    write_spe(tmp_path / "a.spe", _frames("u2"), version=2.5, polynomial=[1.0, 2.0])
    _patch(tmp_path / "a.spe", offset, fmt, value)
    assert _error(tmp_path / "a.spe").field == field


def test_truncated_v2(tmp_path):
    path = tmp_path / "a.spe"
    write_spe(path, _frames("f4"), version=2.5)
    path.write_bytes(path.read_bytes()[:-1])
    err = _error(path)
    assert err.field == "data size" and "bytes" in str(err.expected)


def _v3(tmp_path, **kwargs):
    path = tmp_path / "a.spe"
    write_spe(path, _frames("u2"), wavelengths=np.arange(X, dtype=float), **kwargs)
    raw = path.read_bytes()
    xml_offset = struct.unpack_from("<Q", raw, 678)[0]
    return path, raw[:xml_offset], raw[xml_offset:].decode()


@pytest.mark.parametrize("old,new,field", [
    ('count="4"', 'count="5"', "data size"),
    ('count="4"', 'count="0"', "XML DataBlock[Frame].count"),
    ('MonochromeUnsigned16', 'MonochromeUnsigned64', "XML pixelFormat"),
    ('stride="30"', 'stride="20"', "XML Frame.size/stride"),
    ('width="5"', 'width="x"', "XML DataBlock[Region].width"),
    ('<Calibrations>', '<Calibrations', "XML footer"),
    ('0.0,1.0,2.0,3.0,4.0', '0.0,1.0,2.0,3.0', "XML Wavelength"),
    ('0.0,1.0,2.0,3.0,4.0', '0.0,1.0,nm,3.0,4.0', "XML Wavelength"),
    ('type="Region" version="3.0" count="1"', 'type="Region" version="3.0" count="2"',
     "XML Region"),
])
def test_malformed_v3_footer(tmp_path, old, new, field):
    path, body, footer = _v3(tmp_path)
    assert old in footer
    path.write_bytes(body + footer.replace(old, new).encode())
    assert _error(path).field == field


def test_garbage_footer(tmp_path):
    path, body, _ = _v3(tmp_path)
    path.write_bytes(body + b"\x00\xffnot xml at all")
    assert _error(path).field == "XML footer"


@pytest.mark.parametrize("xml_offset", [0, 100, 10**9])
def test_footer_offset_outside_file(tmp_path, xml_offset):
    path, _, _ = _v3(tmp_path)
    _patch(path, 678, "<Q", xml_offset)
    assert _error(path).field == "XML_Offset"


def test_truncated_v3_data(tmp_path):
    path, body, footer = _v3(tmp_path, metadata_bytes_per_frame=8)
    path.write_bytes(body[:-8] + footer.encode())  # drop the last frame's metadata
    _patch(path, 678, "<Q", len(body) - 8)
    assert _error(path).field == "data size"


def test_read_argument_errors(tmp_path):
    spe = open_spe(write_spe(tmp_path / "a.spe", _frames("u2")))
    with pytest.raises(IndexError, match="i="):
        spe.read_frame(F)
    with pytest.raises(TypeError, match="i must"):
        spe.read_frame(1.0)
    with pytest.raises(IndexError, match="stop="):
        spe.read_frames(1, F + 1)


def test_writer_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        write_spe(tmp_path / "a.spe", _frames("i2"))  # no 3.0 pixel format for int16
    with pytest.raises(ValueError, match="3.0"):
        write_spe(tmp_path / "a.spe", _frames("u2"), version=2.5, metadata_bytes_per_frame=8)
    with pytest.raises(ValueError, match="shape"):
        write_spe(tmp_path / "a.spe", np.zeros((2, 3), np.uint16))


def _stacked(spe, start, stop):
    return np.stack([spe.read_frame(i) for i in range(start, stop)])


@pytest.mark.parametrize("version,meta", [(2.5, 0), (3.0, 0), (3.0, 8), (3.0, 24)])
@pytest.mark.parametrize("dtype", ["u2", "f4"])
def test_frames_rows_and_columns_equal_read_frame(tmp_path, version, meta, dtype):
    frames = _frames(dtype, seed=2)
    path = write_spe(tmp_path / "a.spe", frames, version=version,
                     metadata_bytes_per_frame=meta)
    with open_spe(path) as spe:
        for start, stop in ((0, 1), (F - 1, F), (1, 3), (0, F)):
            whole = _stacked(spe, start, stop)
            for rows in ((0, 1), (Y - 1, Y), (1, 3), (0, Y)):
                for columns in (None, [X - 1, 0, 2], [3], [1, 1]):
                    got = spe.read_frames(start, stop, rows=rows, columns=columns)
                    want = whole[:, rows[0]:rows[1]]
                    want = want if columns is None else want[:, :, columns]
                    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
                    np.testing.assert_array_equal(got, want)
        got = spe.read_frames(0, F, columns=np.array([4, 0]))
        got[:] = 0  # an independent copy
        np.testing.assert_array_equal(spe.read_frames(0, F, columns=[4, 0]), frames[:, :, [4, 0]])


@pytest.mark.parametrize("rows,columns,error", [
    ((0, 0), None, IndexError), ((-1, 2), None, IndexError), ((0, Y + 1), None, IndexError),
    ((1.0, 2), None, TypeError), (None, [X], IndexError), (None, [], ValueError),
    (None, "ab", TypeError), (None, [0.5], TypeError)])
def test_rows_and_columns_are_checked(tmp_path, rows, columns, error):
    spe = open_spe(write_spe(tmp_path / "a.spe", _frames("u2")))
    with pytest.raises(error):
        spe.read_frames(0, 2, rows=rows, columns=columns)


@pytest.mark.parametrize("meta", [0, 8])
@pytest.mark.parametrize("start,stop,rows", [(0, 1, (0, 1)), (F - 1, F, (Y - 1, Y)),
                                            (1, 3, (1, 2)), (2, F, (0, Y))])
def test_reads_need_only_their_rows_bytes(tmp_path, meta, start, stop, rows):
    """Truncated after open to exactly the end of the rows read, a read still works; one byte
    shorter, it raises FormatError naming the file, the field and both sizes."""
    frames = _frames("u2", seed=3)
    path = write_spe(tmp_path / "a.spe", frames, metadata_bytes_per_frame=meta)
    stride = Y * X * 2 + meta
    end = 4100 + (stop - 1) * stride + rows[1] * X * 2
    want = frames[start:stop, rows[0]:rows[1]][:, :, [4, 1]]
    with open_spe(path) as spe:
        os.truncate(path, end)
        np.testing.assert_array_equal(spe.read_frames(start, stop, rows=rows, columns=[4, 1]),
                                      want)
        os.truncate(path, end - 1)
        with pytest.raises(FormatError) as info:
            spe.read_frames(start, stop, rows=rows, columns=[4, 1])
    assert info.value.path == str(path) and info.value.field == "data size"
    assert info.value.value == f"{end - 1} bytes" and info.value.expected == f">= {end} bytes"


def test_truncated_after_open_raises_instead_of_sigbus(tmp_path):
    """The frames span many pages; without the size check the last read kills the process."""
    frames = np.arange(6 * 64 * 64, dtype=np.uint16).reshape(6, 64, 64)
    path = write_spe(tmp_path / "a.spe", frames, metadata_bytes_per_frame=8)
    with open_spe(path) as spe:
        os.truncate(path, 4100 + 64 * 64 * 2)
        np.testing.assert_array_equal(spe.read_frame(0), frames[0])
        with pytest.raises(FormatError, match=r"a\.spe: data size: file was truncated"):
            spe.read_frame(5)
        with pytest.raises(FormatError, match="data size"):
            spe.read_frames(3, 6, rows=(0, 2), columns=[0])
