"""What a tar file really stores as a member's name and size: its header chain, parsed.

A member's header is not always one 512-byte block with its name in the first 100 bytes:
a name that is not ASCII or longer than 100 bytes goes into a PAX extended header (`x`,
`path=` record; the plain header then holds a stand-in such as `?n?code/??.jpg` or the
first 100 bytes) or a GNU long-name member (`././@LongLink`, type `L`) in front of it; a
POSIX (ustar) header splits a long name into `prefix` and `name`; sizes of 8 GiB and more
are PAX `size=` records or base-256 numbers. `member_at` reads the chain the way Python's
`tarfile` does, so a shard's index (built with `tarfile`) can be checked against the bytes
at read time. Pure functions over bytes.
"""
from __future__ import annotations

BLOCK = 512
_FILE_TYPES = (b"0", b"\0", b"7")  # regular file, old regular file, contiguous file
_SKIPPED = (b"g", b"K")  # a global PAX header, a GNU long link name: nothing for us
MAX_CHAIN = 64 << 10  # the most header bytes read in front of a member's data


class HeaderError(ValueError):
    """The bytes are no tar header chain (cut, wrong checksum, unparsable record)."""


def padded(size: int) -> int:
    """`size` rounded up to whole 512-byte blocks."""
    return -(-size // BLOCK) * BLOCK


def member_at(buf: bytes) -> tuple[bytes, int, int]:
    """(name as stored, size, header bytes) of the first regular file whose header chain
    starts `buf`, after any directories, links or extended headers; HeaderError when `buf`
    holds no such chain."""
    pos, pax, long_name = 0, {}, None
    while True:
        block = buf[pos:pos + BLOCK]
        if len(block) < BLOCK or not block.strip(b"\0"):
            raise HeaderError(f"no tar header at byte {pos}")
        _check_sum(block, pos)
        kind, size = block[156:157], _number(block[124:136], pos)
        body = buf[pos + BLOCK:pos + BLOCK + size]
        pos += BLOCK
        if kind in (b"x", b"X"):
            pax = _pax_records(body, pos)
        elif kind == b"L":
            long_name = body.split(b"\0", 1)[0]
        elif kind in _FILE_TYPES:
            name = pax.get(b"path", long_name) or _ustar_name(block)
            return name, _pax_size(pax, pos) if b"size" in pax else size, pos
        elif kind not in _SKIPPED:  # a directory, link, device: belongs to no member
            pax, long_name = {}, None
            size = 0 if kind in (b"1", b"2", b"3", b"4", b"5", b"6") else size
        pos += padded(size) if kind not in _FILE_TYPES else 0


def _pax_size(pax: dict[bytes, bytes], pos: int) -> int:
    try:
        return int(pax[b"size"])
    except ValueError:
        raise HeaderError(f"PAX header before byte {pos}: size {pax[b'size']!r} is no "
                          "number") from None


def _ustar_name(block: bytes) -> bytes:
    name = block[:100].split(b"\0", 1)[0]
    if block[257:265] == b"ustar\x0000" and block[345:346] != b"\0":  # POSIX, not GNU
        return block[345:500].split(b"\0", 1)[0] + b"/" + name
    return name


def _number(field: bytes, pos: int) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # base-256 (GNU): sizes of 8 GiB and more
        value = int.from_bytes(field[1:], "big")
        return value - (256 ** (len(field) - 1)) if field[:1] == b"\xff" else value
    try:
        return int(field.split(b"\0", 1)[0].strip() or b"0", 8)
    except ValueError:
        raise HeaderError(f"tar header at byte {pos - BLOCK}: size {field!r} is no "
                          "octal number") from None


def _check_sum(block: bytes, pos: int) -> None:
    stored = _number(block[148:156], pos + BLOCK)
    rest = block[:148] + block[156:]
    signed = sum(b - 256 if b > 127 else b for b in rest) + 8 * 32
    if stored not in (sum(rest) + 8 * 32, signed):
        raise HeaderError(f"tar header at byte {pos}: checksum does not match")


def _pax_records(body: bytes, pos: int) -> dict[bytes, bytes]:
    """`<length> <key>=<value>\\n` records of a PAX extended header."""
    out, at = {}, 0
    while at < len(body) and body[at:at + 1] not in (b"\0", b""):
        length = body[at:at + 20].partition(b" ")[0]
        try:
            n = int(length)
        except ValueError:
            raise HeaderError(f"PAX header at byte {pos - BLOCK}: record length "
                              f"{length!r} is no number") from None
        record = body[at:at + n]
        if n <= len(length) + 1 or not record.endswith(b"\n") or b"=" not in record:
            raise HeaderError(f"PAX header at byte {pos - BLOCK}: malformed record")
        key, _, value = record[len(length) + 1:-1].partition(b"=")
        out[key] = value
        at += n
    return out
