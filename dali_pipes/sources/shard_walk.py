"""Every member of a WebDataset shard, grouped into samples, with small members' bytes.

For sample types whose members are not one image + one label (detection: an image and its
annotations JSON; packed videos: a video, a `.cls` and an `.imu.csv`). Members are grouped
by webdataset's key rule (`<key>.<ext>`, the key up to the first dot of the base name;
consecutive members of one key form a sample), as `dali_pipes.stores.tar_index` groups
them. The walk reads the tar headers once through the store (sequentially: a remote shard
is streamed, not fetched member by member) and keeps the bytes of members with the
extensions asked for (JSON annotations, labels, IMU tables).
"""
from __future__ import annotations

import os
import re
import tarfile
import warnings
from dataclasses import dataclass, field

from dali_pipes.formats.errors import FormatError
from dali_pipes.stores.tar_index import missing_end


def warn_truncated(shard: str, listed: int) -> None:
    """The warning for a shard whose tar headers end without the end-of-archive block."""
    warnings.warn(f"{shard}: truncated shard (no end-of-archive block where the headers "
                  f"end: cut short, or a header that lies about a size); {listed} samples "
                  f"listed, members after the cut are lost", stacklevel=3)

_KEY_EXT = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")  # webdataset's key/extension split


@dataclass
class Sample:
    """One sample: its key, `members[ext] = (header offset, data offset, size, member
    name)` (the header offset: where the member's tar header chain starts, PAX or GNU
    long-name records included) and the bytes of the members whose extension was asked
    for."""

    key: str
    members: dict[str, tuple[int, int, int, str]] = field(default_factory=dict)
    small: dict[str, bytes] = field(default_factory=dict)


def walk_samples(shard: str, store, keep: frozenset[str], *, max_keep: int = 64 << 20
                 ) -> tuple[list[Sample], bool]:
    """The samples of `shard` in member order and whether it is truncated.

    Args:
        shard: the shard (a path or URL `store` reads).
        store: a LocalStore or FsspecStore.
        keep: extensions (lower case, e.g. "json", "cls") whose members' bytes are read.
        max_keep: members to keep larger than this are refused (a FormatError naming them).

    Returns:
        (samples, truncated). FormatError naming the shard for a file that is no tar, a
        member whose key repeats out of order, or a duplicate member.
    """
    with store.open(shard) as f:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 (closed below)
        except tarfile.ReadError as exc:
            raise FormatError(shard, "tar header", f"not a tar file ({exc})") from exc
        with tar:
            samples, truncated = _group(tar, shard, keep, max_keep)
            return samples, truncated or missing_end(f, tar.offset)


def _group(tar: tarfile.TarFile, shard: str, keep: frozenset[str], max_keep: int
           ) -> tuple[list[Sample], bool]:
    samples: list[Sample] = []
    seen: set[str] = set()
    while True:
        try:
            info = tar.next()
        except (tarfile.ReadError, EOFError):
            return samples, True
        if info is None:
            return samples, False
        split = _KEY_EXT.match(info.name)
        if not info.isfile() or split is None or os.path.basename(info.name)[:1] == ".":
            continue
        key, ext = split.groups()
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
                raise FormatError(shard, f"member {info.name}", "too large to read whole",
                                  value=info.size, expected=f"<= {max_keep} bytes")
            handle = tar.extractfile(info)
            data = handle.read() if handle is not None else b""
            if len(data) != info.size:
                return samples, True
            sample.small[ext] = data
