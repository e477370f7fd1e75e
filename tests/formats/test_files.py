"""Reading whole files never blocks on a FIFO (issue 15 item 12)."""
import os

import numpy as np
import pytest

from dali_pipes.formats import FormatError, read_imu, write_imu
from dali_pipes.formats.files import read_file_bytes


def test_regular_file_bytes(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00\xffabc")
    got = read_file_bytes(tmp_path / "a.bin")
    assert got.dtype == np.uint8 and got.tobytes() == b"\x00\xffabc"
    assert read_file_bytes(tmp_path / "a.bin").flags.writeable
    (tmp_path / "empty").write_bytes(b"")
    assert read_file_bytes(tmp_path / "empty").size == 0


@pytest.mark.parametrize("reader", [read_file_bytes, read_imu])
def test_fifo_is_refused_at_once(tmp_path, reader):
    fifo = tmp_path / "x.imu.csv"
    os.mkfifo(fifo)  # nobody writes: a blocking open() would never return
    with pytest.raises(FormatError, match="not a regular file") as info:
        reader(fifo)
    assert info.value.path == str(fifo) and info.value.field == "file"


def test_imu_text_still_reads_with_crlf(tmp_path):
    path = tmp_path / "a.imu.csv"
    write_imu(path, np.arange(4.0), np.ones((4, 2)), ("ax", "ay"))
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    stream = read_imu(path)
    assert stream.channels == ("ax", "ay") and len(stream.t) == 4


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_file_bytes(tmp_path / "nope")
