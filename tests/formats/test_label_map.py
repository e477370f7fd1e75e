"""Label maps (issue 15 item 9): bad .npy headers, impossible shapes and labels that do not
fit int64 are FormatErrors naming the file and field, never TokenError or MemoryError."""
import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.formats.label_map import read_label_map


def _npy_with_header(path, header: str, payload: bytes = b"") -> None:
    text = header.ljust(118) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()
                     + payload)


def test_a_good_map_reads_back(tmp_path):
    labels = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.save(tmp_path / "a.labels.npy", labels)
    got = read_label_map(tmp_path / "a.labels.npy", (3, 4))
    assert (got == labels).all() and got.dtype == np.uint8
    np.save(tmp_path / "f.labels.npy", np.asfortranarray(labels.astype(np.int32)))
    assert (read_label_map(tmp_path / "f.labels.npy", (3, 4)) == labels).all()


@pytest.mark.parametrize("header", [
    "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), ",  # tokenize.TokenError
    "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4)} )",
    "not a dict at all",
])
def test_bad_headers_name_file_and_field(tmp_path, header):
    path = tmp_path / "x.labels.npy"
    _npy_with_header(path, header, b"\0" * 48)
    with pytest.raises(FormatError, match="x.labels.npy: label map header") as info:
        read_label_map(path, (3, 4))
    assert info.value.field == "label map header"


def test_a_shape_the_file_cannot_hold_is_not_a_memory_error(tmp_path):
    path = tmp_path / "big.labels.npy"
    _npy_with_header(path, "{'descr': '<i8', 'fortran_order': False, "
                     "'shape': (200000, 300000), }", b"\0" * 64)
    with pytest.raises(FormatError, match="label map size"):
        read_label_map(path, (200000, 300000))


@pytest.mark.parametrize("labels, shape, field", [
    (np.array([[1, 2**63]], np.uint64), (1, 2), "label map values"),
    (np.array([[1, -1]], np.int16), (1, 2), "label map values"),
    (np.ones((2, 2), np.float32), (2, 2), "label map dtype"),
    (np.ones((2, 2), np.int32), (2, 3), "label map shape"),
])
def test_bad_contents(tmp_path, labels, shape, field):
    np.save(tmp_path / "x.labels.npy", labels)
    with pytest.raises(FormatError, match=field) as info:
        read_label_map(tmp_path / "x.labels.npy", shape)
    assert info.value.path.endswith("x.labels.npy") and info.value.field == field


def test_largest_int64_label_is_kept(tmp_path):
    np.save(tmp_path / "x.labels.npy", np.array([[0, 2**63 - 1]], np.uint64))
    assert read_label_map(tmp_path / "x.labels.npy", (1, 2))[0, 1] == 2**63 - 1


def test_truncated_data(tmp_path):
    path = tmp_path / "x.labels.npy"
    np.save(path, np.ones((4, 4), np.int32))
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(FormatError, match="label map size"):
        read_label_map(path, (4, 4))
