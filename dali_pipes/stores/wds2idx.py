"""DALI's WebDataset index files (the `.idx` its `wds2idx` tool writes), read and checked.

The format (version "v1.2", the one `wds2idx` in DALI 2.4 writes and
`fn.readers.webdataset` reads): a first line `v1.2 <number of samples>`, then one line per
sample holding, per member of the sample, four fields separated by spaces:
`<extension> <data offset> <size> <member name>`. Offsets point at the member's data (past
its 512-byte tar header), so they are multiples of 512. Version "v1.1" lines hold
`<extension> <offset> <size>` only: without member names they cannot name the samples, so
such an index is not used (the shard's own index is built from the tar instead).

`wds2idx` writes `<shard name up to its first dot>.idx` by default (train-000001.tar ->
train-000001.idx); that name is used where it is unambiguous (no other dot in the shard's
name: train.000.tar and train.001.tar would share train.idx), and `<shard>.idx`
(train-000001.tar.idx) always.
"""
from __future__ import annotations

import os
import warnings

from dali_pipes.formats.errors import FormatError
from dali_pipes.stores.tar_header import BLOCK, MAX_CHAIN, HeaderError, member_at, padded

VERSION = "v1.2"
_BLOCK = BLOCK


def wds2idx_path(shard: str) -> str | None:
    """The `.idx` file beside local `shard` (`<shard>.idx`, else `<stem>.idx` where the
    shard's name has no other dot than its `.tar`'s), or None when there is none."""
    name = os.path.basename(shard)
    candidates = [shard + ".idx"]
    if name.endswith(".tar") and "." not in name[1:-4]:
        candidates.append(shard[:-4] + ".idx")  # wds2idx's default for this name
    return next((c for c in candidates if os.path.isfile(c)), None)


def read_wds2idx(path: str, shard_size: int) -> list[tuple[str, int, int]] | None:
    """The members (name, data offset, size) a `wds2idx` index lists, in order.

    Args:
        path: the `.idx` file.
        shard_size: the size of the shard it describes, in bytes.

    Returns:
        The members, or None (with a warning naming the file) for a "v1.1" index, which
        holds no member names. FormatError naming the file and the line (1: the version
        line) for another version, a sample count that is not a positive integer or does
        not match the lines, a line whose fields do not come in fours, an offset or size
        that is no integer, an offset that is no multiple of 512, or a member that does
        not lie inside the shard.
    """
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    count = _header(path, lines[0].split() if lines else [])
    if count is None:
        return None
    body = lines[1:]
    while body and not body[-1].strip():
        body.pop()
    if len(body) != count:
        raise FormatError(path, "line 1", f"the index says {count} samples but lists "
                          f"{len(body)}", value=len(body), expected=count)
    members: list[tuple[str, int, int]] = []
    for number, line in enumerate(body, start=2):
        members.extend(_sample(path, number, line.split(" "), shard_size))
    return members


def _header(path: str, fields: list[str]) -> int | None:
    if not fields or not fields[0].startswith("v"):
        raise FormatError(path, "line 1", "no version signature", value=" ".join(fields),
                          expected=f"'{VERSION} <number of samples>'")
    if fields[0] == "v1.1":
        warnings.warn(f"{path}: wds2idx index version v1.1 holds no member names; the "
                      "shard's index is built from the tar instead", stacklevel=4)
        return None
    if fields[0] != VERSION:
        raise FormatError(path, "line 1: version", "unsupported index version",
                          value=fields[0], expected=f"{VERSION} (or v1.1)")
    try:
        count = int(fields[1]) if len(fields) == 2 else -1
    except ValueError:
        count = -1
    if count < 1:
        raise FormatError(path, "line 1: sample count", "not a positive integer",
                          value=" ".join(fields[1:]), expected="one integer >= 1")
    return count


def _sample(path: str, number: int, fields: list[str], shard_size: int
            ) -> list[tuple[str, int, int]]:
    fields = [f for f in fields if f]
    where = f"line {number}"
    if not fields or len(fields) % 4:
        raise FormatError(path, where, f"{len(fields)} fields: members need four each",
                          expected="<ext> <offset> <size> <member name>, repeated")
    out = []
    for k in range(0, len(fields), 4):
        _ext, offset_text, size_text, name = fields[k:k + 4]
        try:
            offset, size = int(offset_text), int(size_text)
        except ValueError:
            raise FormatError(path, f"{where}: member {name}", "offset or size is no "
                              "integer", value=(offset_text, size_text)) from None
        if offset < _BLOCK or offset % _BLOCK or size < 0:
            raise FormatError(path, f"{where}: member {name}", "offset is no multiple of "
                              "512 past the first header, or size is negative",
                              value=(offset, size))
        if offset + size > shard_size:
            raise FormatError(path, f"{where}: member {name}", "the member ends past the "
                              "end of the shard (the index is stale or the shard truncated)",
                              value=offset + size, expected=f"<= {shard_size}")
        out.append((name, offset, size))
    return out


def with_headers(members: list[tuple[str, int, int]]) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, header chain start) of listed members: a chain starts where
    the member before ends (directories or extended headers may lie in between); with
    more than MAX_CHAIN bytes in between, at the plain header only."""
    out, end = [], 0
    for name, offset, size in members:
        head = end if 0 <= offset - BLOCK - end <= MAX_CHAIN else offset - BLOCK
        out.append((name, offset, size, head))
        end = offset + padded(size)
    return out


def check_member_header(chain: bytes, idx: str, shard: str, name: str, size: int) -> None:
    """FormatError naming the index `idx` unless the header chain `chain` (read from the
    shard where `with_headers` says the member's chain starts) names the member `name`
    of `size` bytes, its data right after it."""
    try:
        found, found_size, length = member_at(chain)
    except HeaderError as exc:
        found, found_size, length = str(exc).encode(), -1, -1
    if (found, found_size, length) != (name.encode("utf-8", "surrogateescape"), size,
                                       len(chain)):
        raise FormatError(idx, f"member {name}", f"the index does not describe {shard} (no "
                          "such tar header at its offset): rebuild it with wds2idx or delete "
                          "it", value=(found.decode("utf-8", "replace"), found_size),
                          expected=(name, size))
