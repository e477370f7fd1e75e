"""The tar header chain parser against headers Python's `tarfile` writes: names and sizes
as `tarfile` reads them back, directories skipped, and bytes that are no header refused."""
from __future__ import annotations

import io
import tarfile

import pytest

from dali_pipes.stores.tar_header import HeaderError, member_at


def _tar(entries, fmt) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT,
                                 tarfile.USTAR_FORMAT])
def test_names_and_sizes_as_tarfile_reads_them(fmt):
    names = ["a.jpg", "x" * 96 + ".jpg", "p" * 120 + "/q.jpg"]  # 100 bytes: the field full
    if fmt != tarfile.USTAR_FORMAT:
        names += ["ünïcode/日本.jpg", "é" * 80 + ".jpg"]
    raw = _tar([(n, n.encode()[:7], tarfile.REGTYPE) for n in names], fmt)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for info in tar.getmembers():
            name, size, length = member_at(raw[info.offset:info.offset_data])
            assert (name.decode(), size, info.offset + length) == \
                (info.name, info.size, info.offset_data)


def test_directories_and_links_in_front_are_skipped():
    raw = _tar([("d", b"", tarfile.DIRTYPE), ("l", b"", tarfile.SYMTYPE),
                ("d/ünï.jpg", b"abc", tarfile.REGTYPE)], tarfile.PAX_FORMAT)
    assert member_at(raw)[:2] == ("d/ünï.jpg".encode(), 3)


def test_gnu_base256_sizes():
    block = bytearray(_tar([("big.bin", b"", tarfile.REGTYPE)], tarfile.GNU_FORMAT)[:512])
    block[124:136] = b"\x80" + (9 << 30).to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}\0 ".encode()
    assert member_at(bytes(block)) == (b"big.bin", 9 << 30, 512)


@pytest.mark.parametrize("damage", ["zeros", "checksum", "cut", "pax record"])
def test_bytes_that_are_no_header_chain_are_refused(damage):
    raw = bytearray(_tar([("ünï.jpg", b"abc", tarfile.REGTYPE)], tarfile.PAX_FORMAT))
    if damage == "zeros":
        raw = bytearray(1024)
    elif damage == "checksum":
        raw[0] ^= 1
    elif damage == "cut":
        raw = raw[:700]
    else:
        raw[512:514] = b"zz"  # the first record's length
    with pytest.raises(HeaderError):
        member_at(bytes(raw))
