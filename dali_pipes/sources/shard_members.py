"""Samples of WebDataset tar shards of videos (with IMU tables for fusion), labelled.

The shard is walked once per shard and process (`shard_walk.walk_samples`: tar headers and
label members only). Each sample keeps, per extension, the member's name, data offset and
size; the label comes from `<key>.cls` (an integer) or
`<key>.json` (`{"label": int}`), read when the sample is listed (`tar_index.parse_label`:
a malformed one is BAD_LABEL, a missing one NO_LABEL, and reading that sample fails with
a FormatError naming the shard, the member and the field).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from dali_pipes.formats.errors import FormatError
from dali_pipes.sources.shard_walk import Sample, walk_samples
from dali_pipes.stores.tar_index import MAX_LABEL_BYTES, NO_LABEL, parse_label

LABEL_EXTS = ("cls", "json")


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
    walk = walk_samples(shard, store, frozenset(LABEL_EXTS), max_keep=MAX_LABEL_BYTES)
    samples = []
    for found in walk.samples:
        sample = ShardSample(shard, found.key, {
            ext: (name, offset, size) for ext, (_, offset, size, name) in found.members.items()})
        sample.label = _label(found)
        samples.append(sample)
    return samples, walk.ignored, walk.truncated


def _label(sample: Sample) -> int:
    """The sample's label from its `.cls` or `.json` member, of any size up to
    MAX_LABEL_BYTES (a JSON with a long caption beside its label is a valid label)."""
    for ext in LABEL_EXTS:
        if ext in sample.members:
            return parse_label(sample.small.get(ext), ext)
    return NO_LABEL


@dataclass
class ShardListing:
    """The samples of every shard of a list of sources, in order."""

    samples: list[ShardSample]
    source_ids: list[int]  # the source of each sample
    ignored: int  # members that belong to no sample
    truncated: list[str]  # the shards that end before their end block


def list_shards(sources, store) -> ShardListing:
    """Every shard of `sources` (one list of shards per source) listed with `list_shard`;
    ValueError naming the first shard when none holds a sample."""
    out = ShardListing([], [], 0, [])
    for source, shards in enumerate(sources):
        for shard in shards:
            found, ignored, truncated = list_shard(shard, store)
            out.samples += found
            out.source_ids += [source] * len(found)
            out.ignored += ignored
            out.truncated += [shard] * truncated
    if not out.samples:
        first = next((s for shards in sources for s in shards), "data")
        raise ValueError(f"{first}: no samples in {sum(map(len, sources))} shard(s)")
    return out


def samples_digest(shards, samples: list[ShardSample]) -> str:
    """sha256 of the shard names (not folders) and of every sample's member names and
    sizes: what a resumed loader compares."""
    digest = hashlib.sha256()
    for shard in shards:
        digest.update(os.path.basename(shard).encode() + b"\0")
    for sample in samples:
        for ext in sorted(sample.members):
            name, _, size = sample.members[ext]
            digest.update(f"{name}\0{size}\0".encode())
    return digest.hexdigest()
