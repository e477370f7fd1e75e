"""Samples of WebDataset tar shards whose members are of any kind (videos, IMU tables, ...).

`dali_pipes.stores.tar_index` indexes image shards (one image member per sample). This module
walks a shard's tar headers through a store with small range reads (`StoreFile`, 2 KiB
chunks: the headers, never the members' data) and groups members into samples by
WebDataset's rule (`<key>.<ext>`: the key is the name up to the first dot of its last path
part; consecutive members with one key form a sample). Each sample keeps, per extension, the
member's name, data offset and size; the label comes from `<key>.cls` (an integer) or
`<key>.json` (`{"label": int}`), read when the sample is listed (`tar_index.parse_label`:
a malformed one is BAD_LABEL, a missing one NO_LABEL, and reading that sample fails with
a FormatError naming the shard, the member and the field). The walk is made once per shard
and process (shards of videos hold few, large members).
"""
from __future__ import annotations

import os
import re
import tarfile
from dataclasses import dataclass, field

from dali_pipes.formats.errors import FormatError
from dali_pipes.sources.store_file import ObjectBytes
from dali_pipes.stores.tar_index import (
    BAD_LABEL,
    MAX_LABEL_BYTES,
    NO_LABEL,
    missing_end,
    parse_label,
)

_KEY_EXT = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")  # webdataset's key/extension split
LABEL_EXTS = ("cls", "json")
WALK_CHUNK = 2048


@dataclass
class ShardSample:
    """One sample of a shard: its key, its members {ext: (name, offset, size)}, its label."""

    shard: str
    key: str
    members: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    label: int = NO_LABEL

    def member(self, exts) -> tuple[str, int, int] | None:
        """The first member with one of `exts` (case-insensitive), or None."""
        found = {e.lower(): m for e, m in self.members.items()}
        return next((found[e] for e in exts if e in found), None)

    def check_label(self) -> None:
        """FormatError naming the shard, the member and the field for a bad or no label."""
        if self.label >= 0:
            return
        label = self.member(LABEL_EXTS)
        if self.label == NO_LABEL or label is None:
            raise FormatError(self.shard, f"sample {self.key}", "no label member",
                              expected='<key>.cls (an integer) or <key>.json {"label": int}')
        what = "label" if label[0].endswith(".cls") else 'field "label"'
        raise FormatError(self.shard, f"member {label[0]}",
                          f"{what} is not an integer in [0, 2**63)",
                          expected='<key>.cls (an integer) or <key>.json {"label": int}')


def list_shard(shard: str, store) -> tuple[list[ShardSample], int, bool]:
    """(samples in member order, members ignored (hidden, no extension), truncated).

    FormatError names a shard that is no tar file, or a key whose members are not
    consecutive; StoreError / OSError the shard that cannot be read.
    """
    size = int(store.stat(shard)[0])
    obj = ObjectBytes(store, shard, size, chunk=WALK_CHUNK)
    with obj.open() as f:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 (closed below)
        except tarfile.ReadError as exc:
            raise FormatError(shard, "tar header", f"not a tar file ({exc})") from exc
        with tar:
            members, truncated = _files(tar)
            truncated = truncated or missing_end(f, tar.offset, size)
        samples, ignored = _group(shard, members)
        for sample in samples:
            sample.label = _label(sample, f)
    return samples, ignored, truncated


def _files(tar: tarfile.TarFile) -> tuple[list[tuple[str, int, int]], bool]:
    out: list[tuple[str, int, int]] = []
    while True:
        try:
            info = tar.next()
        except (tarfile.ReadError, EOFError):
            return out, True
        if info is None:
            return out, False
        if info.isfile():
            out.append((info.name, info.offset_data, info.size))


def _group(shard: str, members) -> tuple[list[ShardSample], int]:
    samples: list[ShardSample] = []
    seen: set[str] = set()
    ignored = 0
    for name, offset, size in members:
        split = _KEY_EXT.match(name)
        if split is None or os.path.basename(name)[:1] == ".":
            ignored += 1
            continue
        key, ext = split.groups()
        if not samples or samples[-1].key != key:
            if key in seen:
                raise FormatError(shard, f"member {name}", f"duplicate key {key!r}: its "
                                  "members are not consecutive (or it occurs twice)")
            seen.add(key)
            samples.append(ShardSample(shard, key))
        if ext in samples[-1].members:
            raise FormatError(shard, f"member {name}", "duplicate member")
        samples[-1].members[ext] = (name, offset, size)
    return samples, ignored


def _label(sample: ShardSample, f) -> int:
    for ext in LABEL_EXTS:
        if ext in sample.members:
            _, offset, size = sample.members[ext]
            if size > MAX_LABEL_BYTES:
                return BAD_LABEL
            f.seek(offset)
            return parse_label(f.read(size), ext)
    return NO_LABEL
