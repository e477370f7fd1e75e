"""Property-based fuzzing of the format readers: mutated ENVI headers and data sizes, SPE
headers and XML footers, IMU CSV files. Whatever the bytes, the only exception that may
escape open_envi / open_spe / read_imu is FormatError; once a file opens, reads with valid
arguments raise nothing and return what the shape and dtype promise.

Runs are derandomized (the same examples every time). For a deeper, random search:
`FUZZ_EXAMPLES=5000 python -m pytest tests/fuzz -q`."""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_pipes.formats import FormatError, open_envi, open_spe, read_imu, write_imu
from dali_pipes.formats._spe_writer import write_spe
from dali_pipes.formats.spe import HEADER_FIELDS, SPE_HEADER_BYTES

_DEEP = int(os.environ.get("FUZZ_EXAMPLES", 0))
FUZZ = settings(max_examples=_DEEP or 150, deadline=None, derandomize=not _DEEP,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
NASTY = ["", "0", "-1", "1", "2", "3", "4", "12", "99999999999999999999", "1e3", "3.0", "abc",
         "{", "}", "{1,2}", "nan", "inf", "-inf", " 5 ", "0x10", "-0", "4100", "bsq", "bil",
         "bip", "BIP", "xyz", "1, 2", "{400, nan}", "{400,}", "{,}", "\x00", "é", "=", ";"]
value = st.one_of(st.sampled_from(NASTY), st.text(max_size=12))


def _replace_slice(data, pos: int, length: int, new):
    pos = pos % (len(data) + 1)
    return data[:pos] + new + data[pos + length:]


# --- ENVI ---------------------------------------------------------------------------------
ENVI_LINES = ["ENVI", "description = {fuzz}", "samples = 4", "lines = 3", "bands = 2",
              "header offset = 0", "file type = ENVI Standard", "data type = 2",
              "interleave = bsq", "byte order = 0", "wavelength units = nm",
              "wavelength = {", " 400.0,", " 500.0}"]
ENVI_KEYS = ["samples", "lines", "bands", "header offset", "data type", "interleave",
             "byte order", "wavelength", "file type", "wavelength units"]
ENVI_DATA_BYTES = 4 * 3 * 2 * 2  # int16
# data sizes other headers fit: one band, 1/4/8-byte types, a header offset, off by one
SIZE_DELTAS = [0, 0, 0, -12, 24, 72, 4, -1, 1]

envi_op = st.one_of(
    st.tuples(st.just("set"), st.one_of(st.sampled_from(ENVI_KEYS), st.text(max_size=8)), value),
    st.tuples(st.sampled_from(["drop", "dup"]), st.integers(0, 20), st.none()),
    st.tuples(st.just("insert"), st.integers(0, 20), st.text(max_size=30)),
    st.tuples(st.just("swap"), st.integers(0, 20), st.integers(0, 20)),
    st.tuples(st.just("raw"), st.integers(0, 400), st.binary(min_size=1, max_size=4)),
)


def _mutate_envi(lines: list[str], op) -> list[str] | bytes:
    kind, a, b = op
    lines = list(lines)
    if kind == "set":
        lines = [line for line in lines if not line.startswith(f"{a} =")] + [f"{a} = {b}"]
    elif kind == "drop" and lines:  # index 0 (the "ENVI" line) only when a is a multiple
        del lines[a % len(lines)]  # of the line count: most mutations keep the magic line
    elif kind == "dup" and lines:
        lines.insert(a % len(lines), lines[a % len(lines)])
    elif kind == "insert":
        lines.insert(a % (len(lines) + 1), b)
    elif kind == "swap" and len(lines) > 1:
        i, j = 1 + a % (len(lines) - 1), 1 + b % (len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "raw":
        return _replace_slice("\n".join(lines).encode(), a, len(b), b)
    return lines


def _envi_header(ops) -> bytes:
    lines: list[str] | bytes = ENVI_LINES
    for op in ops:
        if isinstance(lines, bytes):
            lines = lines.decode("utf-8", "replace").split("\n")
        lines = _mutate_envi(lines, op)
    return lines if isinstance(lines, bytes) else "\n".join(lines).encode("utf-8", "replace")


def _check_envi_reads(cube) -> None:
    bands, lines, samples = cube.shape
    assert cube.interleave in ("bsq", "bil", "bip")
    assert cube.wavelengths is None or cube.wavelengths.shape == (bands,)
    for b in {0, bands - 1}:
        band = cube.read_band(b)
        assert band.shape == (lines, samples) and band.dtype == cube.dtype
    patch = cube.read_patch(0, 0, lines, samples, bands=[bands - 1, 0])
    assert patch.shape == (2, lines, samples) and patch.dtype.isnative


@FUZZ
@given(ops=st.lists(envi_op, min_size=1, max_size=4),
       size_delta=st.one_of(st.sampled_from(SIZE_DELTAS), st.integers(-24, 24)))
def test_mutated_envi_raises_only_format_error(tmp_path, ops, size_delta):
    (tmp_path / "cube.hdr").write_bytes(_envi_header(ops))
    (tmp_path / "cube.img").write_bytes(
        np.arange(max(0, ENVI_DATA_BYTES + size_delta), dtype=np.uint8).tobytes())
    try:
        cube = open_envi(tmp_path / "cube.hdr")
    except FormatError:
        return
    with cube:
        _check_envi_reads(cube)


def test_unmutated_envi_template_opens(tmp_path):
    (tmp_path / "cube.hdr").write_bytes(_envi_header([]))
    (tmp_path / "cube.img").write_bytes(bytes(ENVI_DATA_BYTES))
    with open_envi(tmp_path / "cube.hdr") as cube:
        assert cube.shape == (2, 3, 4) and list(cube.wavelengths) == [400.0, 500.0]
        _check_envi_reads(cube)


# --- SPE ----------------------------------------------------------------------------------
FOOTER_NASTY = [b"", b"0", b"-1", b"99999999999", b"abc", b"<", b">", b"</x>", b"\"", b"&",
                b"\x00", b"MonochromeUnsigned8", b"MonochromeFloating32", b"nan", b"1e400"]
spe_op = st.one_of(
    st.tuples(st.just("field"), st.sampled_from(sorted(HEADER_FIELDS)), st.binary(min_size=48,
                                                                                 max_size=48)),
    st.tuples(st.just("byte"), st.integers(0, SPE_HEADER_BYTES - 1), st.binary(min_size=1,
                                                                              max_size=4)),
    st.tuples(st.just("footer"), st.integers(0, 4000), st.tuples(
        st.integers(0, 8), st.one_of(st.sampled_from(FOOTER_NASTY), st.binary(max_size=6)))),
    st.tuples(st.just("truncate"), st.integers(0, 6000), st.none()),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=64), st.none()),
)


def _mutate_spe(raw: bytes, op, footer_at: int) -> bytes:
    kind, a, b = op
    if kind == "field":
        offset, fmt = HEADER_FIELDS[a]
        return _replace_slice(raw, offset, struct.calcsize(fmt), b[:struct.calcsize(fmt)])
    if kind == "byte":
        return _replace_slice(raw, a, len(b), b)
    if kind == "footer" and len(raw) > footer_at:
        length, new = b
        pos = footer_at + a % (len(raw) - footer_at)
        return raw[:pos] + new + raw[pos + length:]
    if kind == "truncate":
        return raw[: a % (len(raw) + 1)]
    if kind == "append":
        return raw + a
    return raw


def _spe_bytes(tmp_path, version: float, dtype: str) -> tuple[bytes, int]:
    frames = np.arange(2 * 3 * 4, dtype=dtype).reshape(2, 3, 4)
    options = ({"wavelengths": [500.0, 510.0, 520.0, 530.0], "metadata_bytes_per_frame": 8}
               if version >= 3 else {"polynomial": [400.0, 2.0, 0.01]})
    path = write_spe(tmp_path / "orig.spe", frames, version=version, **options)
    raw = open(path, "rb").read()
    footer_at = struct.unpack_from("<Q", raw, HEADER_FIELDS["XML_Offset"][0])[0] or len(raw)
    return raw, footer_at


def _check_spe_reads(spe) -> None:
    frames, ydim, xdim = spe.shape
    assert spe.wavelengths is None or spe.wavelengths.shape == (xdim,)
    for i in {0, frames - 1}:
        frame = spe.read_frame(i)
        assert frame.shape == (ydim, xdim) and frame.dtype == spe.dtype


@FUZZ
@given(version=st.sampled_from([2.5, 3.0]), dtype=st.sampled_from(["<u2", "<f4"]),
       ops=st.lists(spe_op, min_size=1, max_size=4))
def test_mutated_spe_raises_only_format_error(tmp_path, version, dtype, ops):
    raw, footer_at = _spe_bytes(tmp_path, version, dtype)
    for op in ops:
        raw = _mutate_spe(raw, op, footer_at)
    (tmp_path / "fuzz.spe").write_bytes(raw)
    try:
        spe = open_spe(tmp_path / "fuzz.spe")
    except FormatError:
        return
    with spe:
        _check_spe_reads(spe)


# --- IMU ----------------------------------------------------------------------------------
imu_op = st.one_of(
    st.tuples(st.just("cell"), st.tuples(st.integers(0, 7), st.integers(0, 3)), value),
    st.tuples(st.sampled_from(["drop", "dup", "blank", "comma", "uncomma"]), st.integers(0, 7),
              st.none()),
    st.tuples(st.just("insert"), st.integers(0, 7), st.text(max_size=30)),
    st.tuples(st.just("raw"), st.integers(0, 300), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("truncate"), st.integers(0, 300), st.none()),
)


def _mutate_rows(rows: list[str], kind: str, a, b) -> list[str]:
    i = (a[0] if isinstance(a, tuple) else a) % max(1, len(rows))
    if not rows:
        return [b] if kind == "insert" else rows
    if kind == "cell":
        cells = rows[i].split(",")
        cells[a[1] % len(cells)] = b
        rows[i] = ",".join(cells)
    elif kind in ("drop", "dup", "blank", "insert"):
        new = {"drop": [], "dup": [rows[i], rows[i]], "blank": ["", rows[i]],
               "insert": [b, rows[i]]}[kind]
        rows[i:i + 1] = new
    elif kind == "comma":
        rows[i] += ","
    elif kind == "uncomma":
        rows[i] = rows[i].replace(",", "", 1)
    return rows


def _mutate_imu(raw: bytes, op) -> bytes:
    kind, a, b = op
    if kind == "raw":
        return _replace_slice(raw, a, len(b), b)
    if kind == "truncate":
        return raw[: a % (len(raw) + 1)]
    rows = raw.decode("utf-8", "replace").split("\n")
    return "\n".join(_mutate_rows(rows, kind, a, b)).encode("utf-8", "surrogatepass")


@FUZZ
@given(ops=st.lists(imu_op, min_size=1, max_size=4))
def test_mutated_imu_raises_only_format_error(tmp_path, ops):
    t = np.linspace(0.0, 0.04, 5)
    write_imu(tmp_path / "orig.imu.csv", t, np.column_stack([t * 2, -t]), ["ax", "ay"])
    raw = (tmp_path / "orig.imu.csv").read_bytes()
    for op in ops:
        raw = _mutate_imu(raw, op)
    (tmp_path / "fuzz.imu.csv").write_bytes(raw)
    try:
        stream = read_imu(tmp_path / "fuzz.imu.csv")
    except FormatError:
        return
    assert stream.values.shape == (len(stream), len(stream.channels))
    assert np.isfinite(stream.t).all() and np.isfinite(stream.values).all()


@pytest.mark.parametrize("version", [2.5, 3.0])
def test_unmutated_spe_and_imu_templates_open(tmp_path, version):
    raw, _ = _spe_bytes(tmp_path, version, "<u2")
    (tmp_path / "x.spe").write_bytes(raw)
    with open_spe(tmp_path / "x.spe") as spe:
        assert spe.shape == (2, 3, 4)
        _check_spe_reads(spe)
    t = np.linspace(0.0, 0.04, 5)
    write_imu(tmp_path / "x.imu.csv", t, t[:, None], ["ax"])
    assert len(read_imu(tmp_path / "x.imu.csv")) == 5
