"""Every member of a WebDataset shard, grouped into samples, with small members' bytes.

For sample types whose members are not one image + one label (`dali_pipes.stores.tar_index`
indexes those): videos with a label and an IMU table, an image with its annotations JSON.
Members are grouped by WebDataset's key rule (`<key>.<ext>`: the key is the name up to the
first dot of its last path part; consecutive members of one key form a sample). The walk
reads the tar headers once through the store with small range reads (`ObjectBytes`: the
headers, and the members asked for, never the other members' data) and keeps the bytes of
members with the extensions asked for (labels, JSON annotations, IMU tables).
"""
from __future__ import annotations

import os
import re
import tarfile
import warnings
from dataclasses import dataclass, field

from dali_pipes.formats.errors import FormatError
from dali_pipes.stores.object_file import ObjectBytes
from dali_pipes.stores.tar_index import missing_end

_KEY_EXT = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")  # webdataset's key/extension split
WALK_CHUNK = 2048  # bytes per range read while walking the headers


@dataclass
class Sample:
    """One sample: its key, `members[ext] = (header offset, data offset, size, member
    name)` (the header offset: where the member's tar header chain starts, PAX or GNU
    long-name records included), the bytes of the members whose extension was asked for
    (`small`), and the extensions asked for but larger than the bound (`oversize`)."""

    key: str
    members: dict[str, tuple[int, int, int, str]] = field(default_factory=dict)
    small: dict[str, bytes] = field(default_factory=dict)
    oversize: set[str] = field(default_factory=set)


@dataclass
class Walk:
    """A shard's samples in member order, the members that belong to no sample (hidden,
    no extension, not a regular file) and whether the shard ends before its end block."""

    samples: list[Sample]
    ignored: int
    truncated: bool


def walk_samples(shard: str, store, keep: frozenset[str], *, max_keep: int = 64 << 20
                 ) -> Walk:
    """The samples of `shard`.

    Args:
        shard: the shard (a path or URL `store` reads).
        store: a `dali_pipes.stores.Store`.
        keep: extensions (lower case, e.g. "json", "cls") whose members' bytes are read.
        max_keep: members to keep larger than this are not read (`Sample.oversize`).

    Returns:
        The walk. FormatError naming the shard for a file that is no tar, a member whose
        key repeats out of order, or a duplicate member.
    """
    size = int(store.stat(shard)[0])
    with ObjectBytes(store, shard, size, chunk=WALK_CHUNK).open() as f:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 (closed below)
        except tarfile.ReadError as exc:
            raise FormatError(shard, "tar header", f"not a tar file ({exc})") from exc
        with tar:
            walk = _group(tar, shard, keep, max_keep)
            walk.truncated = walk.truncated or missing_end(f, tar.offset, size)
    if walk.truncated:
        warn_truncated(shard, len(walk.samples))
    return walk


def warn_truncated(shard: str, listed: int) -> None:
    """The warning for a shard whose tar headers end without the end-of-archive block."""
    warnings.warn(f"{shard}: truncated shard (no end-of-archive block where the headers "
                  f"end: cut short, or a header that lies about a size); {listed} samples "
                  f"listed, members after the cut are lost", stacklevel=3)


def _group(tar: tarfile.TarFile, shard: str, keep: frozenset[str], max_keep: int) -> Walk:
    walk = Walk([], 0, False)
    seen: set[str] = set()
    while True:
        try:
            info = tar.next()
        except (tarfile.ReadError, EOFError):
            walk.truncated = True
            return walk
        if info is None:
            return walk
        split = _KEY_EXT.match(info.name)
        if not info.isfile() or split is None or os.path.basename(info.name)[:1] == ".":
            walk.ignored += 1
            continue
        key, ext = split.groups()
        samples = walk.samples
        if not samples or samples[-1].key != key:
            if key in seen:
                raise FormatError(shard, f"member {info.name}", f"duplicate key {key!r}: its "
                                  "members are not consecutive (or it occurs twice)")
            seen.add(key)
            samples.append(Sample(key))
        sample = samples[-1]
        if ext in sample.members:
            raise FormatError(shard, f"member {info.name}", "duplicate member")
        sample.members[ext] = (info.offset, info.offset_data, info.size, info.name)
        if ext.lower() in keep:
            if info.size > max_keep:
                sample.oversize.add(ext)
                continue
            handle = tar.extractfile(info)
            data = handle.read() if handle is not None else b""
            if len(data) != info.size:
                walk.truncated = True
                return walk
            sample.small[ext] = data
