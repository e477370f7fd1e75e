"""read_imu / write_imu: round trips and every malformed file naming its line and column."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.imu import ImuStream, imu_path_for, read_imu, write_imu

CHANNELS = ("ax", "ay", "az", "gx", "gy", "gz")


def _stream(rng, n=500):
    t = np.sort(rng.uniform(0, 10, n))
    return t, rng.standard_normal((n, len(CHANNELS))) * 10 ** rng.uniform(-5, 5, (n, 1))


def test_round_trip_is_exact(tmp_path):
    t, values = _stream(np.random.default_rng(0))
    path = write_imu(tmp_path / "clip.imu.csv", t, values, CHANNELS)
    stream = read_imu(path)
    assert isinstance(stream, ImuStream) and len(stream) == t.size
    assert stream.path == str(path)
    assert stream.channels == CHANNELS
    assert stream.t.dtype == np.float64 and stream.values.shape == values.shape
    np.testing.assert_array_equal(stream.t, t)
    np.testing.assert_array_equal(stream.values, values)
    assert not stream.t.flags.writeable and not stream.values.flags.writeable


def test_one_channel_and_unsorted_rows_are_kept_as_written(tmp_path):
    path = write_imu(tmp_path / "a.imu.csv", [2.0, 0.0, 1.0], [5.0, 6.0, 7.0], ["temp"])
    stream = read_imu(path)
    np.testing.assert_array_equal(stream.t, [2.0, 0.0, 1.0])
    np.testing.assert_array_equal(stream.values, [[5.0], [6.0], [7.0]])


def test_bom_crlf_spaces_and_trailing_blank_lines_are_accepted(tmp_path):
    path = tmp_path / "b.imu.csv"
    path.write_bytes("\ufefft, ax ,ay\r\n0, 1.5,2\r\n0.005,1e-3 ,-2\r\n\r\n\r\n".encode())
    stream = read_imu(path)
    assert stream.channels == ("ax", "ay")
    np.testing.assert_array_equal(stream.values, [[1.5, 2.0], [1e-3, -2.0]])


def test_large_file_reads_and_names_the_last_line(tmp_path):
    rng = np.random.default_rng(1)
    t, values = _stream(rng, n=20000)
    path = write_imu(tmp_path / "big.imu.csv", t, values, CHANNELS)
    np.testing.assert_array_equal(read_imu(path).values, values)
    with path.open("a") as f:
        f.write("99,1,2,3,4,5,oops\n")
    with pytest.raises(FormatError, match=r"line 20002, column 7 \(gz\): not a number"):
        read_imu(path)


def test_imu_path_for_video():
    assert imu_path_for("data/walk/clip01.mp4") == Path("data/walk/clip01.imu.csv")


HEADER = "t,a,b\n"


@pytest.mark.parametrize("text, match", [
    ("", r"line 1 \(header\).*empty"),
    ("\n\n", r"line 1 \(header\).*empty"),
    ("time,a,b\n0,1,2\n1,2,3\n", r"line 1 \(header\), column 1.*'time'"),
    ("t\n0\n1\n", r"line 1 \(header\).*no channel"),
    ("t,a,a\n0,1,2\n1,2,3\n", r"line 1 \(header\), column 3.*duplicate.*column 2"),
    ("t,a,t\n0,1,2\n1,2,3\n", r"line 1 \(header\), column 3.*duplicate"),
    ("t,a,,b\n0,1,2,3\n1,2,3,4\n", r"line 1 \(header\), column 3.*empty channel name"),
    (HEADER, r"rows.*too few data rows.*found 0"),
    (HEADER + "0,1,2\n", r"rows.*too few data rows.*found 1"),
    (HEADER + "0,1,2\n1,2\n2,3,4\n", r"line 3: wrong number of cells \(2 cells\)"),
    (HEADER + "0,1,2\n1,2,3,4\n2,3,4\n", r"line 3: wrong number of cells \(4 cells\)"),
    (HEADER + "0,1\n1,2\n", r"line 2: wrong number of cells"),
    (HEADER + "0,1,2\n1,2,3,\n", r"line 3: wrong number of cells"),
    (HEADER + "0,1,2\n\n1,2,3\n", r"line 3: wrong number of cells \(blank line\)"),
    (HEADER + "0,1,2\n1,x,3\n", r"line 3, column 2 \(a\): not a number.*'x'"),
    (HEADER + "0,,2\n1,2,3\n", r"line 2, column 2 \(a\): not a number"),
    (HEADER + '0,1,"2"\n1,2,3\n', r"line 2, column 3 \(b\): not a number"),
    (HEADER + "0,1,2\n1,2,1_000\n", r"line 3, column 3 \(b\): not a number"),
    (HEADER + "0,1,2\nzero,2,3\n", r"line 3, column 1 \(t\): not a number"),
    (HEADER + "0,1,2\nnan,2,3\n", r"line 3, column 1 \(t\): timestamp must be finite"),
    (HEADER + "0,1,2\n1,2,3\n-inf,2,3\n", r"line 4, column 1 \(t\): timestamp must be finite"),
    (HEADER + "0,1,2\n1,2,inf\n", r"line 3, column 3 \(b\): value must be finite"),
    (HEADER + "0,1,2\n1,NaN,3\n", r"line 3, column 2 \(a\): value must be finite"),
])
def test_malformed_file_raises_format_error_naming_line(tmp_path, text, match):
    path = tmp_path / "bad.imu.csv"
    path.write_text(text)
    with pytest.raises(FormatError, match=match) as info:
        read_imu(path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(str(path) + ": ")


def test_missing_file_raises_format_error(tmp_path):
    path = tmp_path / "absent.imu.csv"
    with pytest.raises(FormatError, match=re.escape(str(path)) + r": file: no such file"):
        read_imu(path)


def test_non_utf8_file_raises_format_error(tmp_path):
    path = tmp_path / "latin.imu.csv"
    path.write_bytes(b"t,\xe9\n0,1\n1,2\n")
    with pytest.raises(FormatError, match="UTF-8"):
        read_imu(path)


@pytest.mark.parametrize("t, values, channels, match", [
    ([0.0, 1.0], np.ones((3, 1)), ["a"], "values"),
    ([0.0, 1.0], np.ones((2, 2)), ["a"], "channels"),
    ([0.0, 1.0], np.ones((2, 1)), ["a,b"], "channel names"),
    ([0.0, 1.0], np.ones((2, 1)), [""], "channel names"),
    ([0.0, 1.0], np.ones((2, 1)), ["t"], "channel names"),
])
def test_write_imu_rejects_bad_input(tmp_path, t, values, channels, match):
    with pytest.raises(ValueError, match=match):
        write_imu(tmp_path / "x.imu.csv", t, values, channels)
