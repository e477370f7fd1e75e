"""Image source over WebDataset tar shards, addressed by dataset index.

The listing joins the per-shard indexes (`dali_pipes.stores.tar_index`) into flat numpy
arrays (shard id, offset, size, label, member names as one byte buffer), so a listing of
millions of samples costs tens of MB and forked workers do not copy it page by page. Reads
are byte ranges of the shard through a store; each read also takes the tar header chain in
front of the member (its PAX or GNU long-name headers too, where the name is not ASCII or
longer than 100 bytes) and checks it still names that member and size, so a shard that
changed after it was indexed fails loudly instead of feeding the wrong bytes.
"""
from __future__ import annotations

import hashlib
import os
import warnings

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.image import ImageReads, check_max_pixels
from dali_pipes.sources.shard_manifest import manifest_classes
from dali_pipes.sources.shard_names import flatten, is_shard_data, shard_sources
from dali_pipes.stores import Store
from dali_pipes.stores.select import local_files, open_store
from dali_pipes.stores.tar_header import HeaderError, member_at
from dali_pipes.stores.tar_index import (
    BAD_LABEL,
    LABEL_TOO_BIG,
    MAX_LABEL_BYTES,
    NO_IMAGE,
    NO_LABEL,
    load_index,
)

__all__ = ["ShardSource", "is_shard_data"]


class ShardSource(ImageReads):
    """Samples `<key>.<image ext>` + `<key>.cls`/`<key>.json` of WebDataset tar shards.

    Args:
        data: a `.tar` path, a brace pattern, a list of them (one source), a folder of
            `.tar` files (one source) or a list of such folders (one source each); any of
            these may be fsspec URLs (`s3://bucket/train-{0000..0009}.tar`).
        store: reads the shards (default: LocalStore, or an FsspecStore without cache for
            URLs).
        index_dir: where shard indexes go when a shard's folder is not writable (and where
            the indexes of shards in other stores go; default: the store's `cache_dir`,
            where it has one, else the user's cache).
    """

    def __init__(self, data, *, store: Store | None = None, index_dir: str | None = None,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS):
        self.max_pixels = check_max_pixels(max_pixels)
        self.store = store or open_store(data)
        index_dir = index_dir or store_index_dir(self.store)
        sources = shard_sources(data, self.store)
        self.multi_source = len(sources) > 1
        self.shards = tuple(flatten(sources))
        self.roots = tuple(shard_parent(s[0], self.store) for s in sources)
        indexes = [load_index(s, index_dir=index_dir, store=self.store) for s in self.shards]
        counts = np.asarray([len(i) for i in indexes], np.int64)
        self.shard_ids = np.repeat(np.arange(len(indexes), dtype=np.int32), counts)
        per_source = np.repeat(np.arange(len(sources)), [len(s) for s in sources])
        self.source_ids = np.repeat(per_source, counts).astype(np.int64)
        self.offsets = _concat([i.offsets for i in indexes], np.int64)
        self.sizes = _concat([i.sizes for i in indexes], np.int64)
        self.labels = _concat([i.labels for i in indexes], np.int64)
        self.headers = _concat([i.headers for i in indexes], np.int64)
        self._names = _concat([i.names for i in indexes], np.uint8)
        self._name_ends = _concat(_shifted_ends(indexes), np.int64)
        self.classes = manifest_classes(self.roots, self.labels, self.store) or tuple(
            str(c) for c in np.unique(self.labels[self.labels >= 0]))
        self.ignored = sum(i.ignored for i in indexes)
        _warn_truncated(indexes)
        if len(self.labels) == 0:
            raise ValueError(f"{self.shards[0]}: no samples in {len(self.shards)} shard(s)")

    def __len__(self) -> int:
        return len(self.labels)

    def member(self, index: int) -> str:
        """The image member name of sample `index` (its key when it has none)."""
        return self._member_bytes(index).decode("utf-8", "surrogateescape")

    def _member_bytes(self, index: int) -> bytes:
        start = int(self._name_ends[index - 1]) if index else 0
        return bytes(self._names[start:int(self._name_ends[index])])

    def path(self, index: int) -> str:
        """`<shard>:<member>`: names the shard and the member."""
        return f"{self.shards[self.shard_ids[index]]}:{self.member(index)}"

    def _bytes(self, index: int) -> np.ndarray:
        """The image member's bytes; FormatError (naming shard and member)
        for a sample without image or label, or a shard changed since it was indexed."""
        shard, member = self.shards[self.shard_ids[index]], self.member(index)
        label, offset, size, head = (int(a[index]) for a in (self.labels, self.offsets,
                                                              self.sizes, self.headers))
        if offset == NO_IMAGE:
            raise FormatError(shard, f"sample {member}", "no image member",
                              expected="<key>.jpg/.png/.webp/...")
        if label < 0:
            raise FormatError(shard, f"member {member}", _label_problem(label, member),
                              expected='<key>.cls (an integer) or <key>.json {"label": int}')
        try:
            data = self.store.read_range(shard, head, offset - head + size)
        except EOFError as exc:
            raise FormatError(shard, f"member {member}", f"truncated shard ({exc})") from exc
        _check_header(data[:offset - head].tobytes(), shard, member,
                      self._member_bytes(index), size)
        return data[offset - head:]

    def listing_digest(self) -> str:
        """What identifies the listing for a resume fingerprint: shard names (not folders,
        so moving the data keeps it), samples per shard and member names."""
        digest = hashlib.sha256()
        for shard in self.shards:
            digest.update(os.path.basename(shard).encode() + b"\0")
        digest.update(np.bincount(self.shard_ids, minlength=len(self.shards)).tobytes())
        digest.update(self._names.tobytes())
        digest.update(self._name_ends.tobytes())
        return f"{len(self)} samples in {len(self.shards)} shards, sha256 {digest.hexdigest()}"


def shard_parent(shard: str, store: Store) -> str:
    """The folder of `shard` (absolute for local files)."""
    return os.path.dirname(os.path.abspath(shard)) if local_files(store) else \
        shard.rsplit("/", 1)[0]


def store_index_dir(store: Store) -> str | None:
    """Where the shard indexes of `store` go: under its `cache_dir` (an FsspecStore's block
    cache folder), None (the default) for a store without one."""
    cache_dir = getattr(store, "cache_dir", None)
    return os.path.join(cache_dir, "tar_index") if isinstance(cache_dir, str) else None


def _concat(arrays, dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)


def _shifted_ends(indexes) -> list[np.ndarray]:
    out, base = [], 0
    for index in indexes:
        out.append(index.name_ends + base)
        base += len(index.names)
    return out


def _label_problem(label: int, member: str) -> str:
    if label == NO_LABEL:
        return "no label member"
    if label == BAD_LABEL:
        return "label is not an integer in [0, 2**63)"
    ext = next((e for e, code in LABEL_TOO_BIG.items() if code == label), "cls/.json")
    key = member.rsplit(".", 1)[0]
    return (f"label member {key}.{ext} is larger than {MAX_LABEL_BYTES >> 20} MiB, the bound "
            "for label members")


def _check_header(chain: bytes, shard: str, member: str, stored: bytes, size: int) -> None:
    """The tar header chain in front of the member's data still names it and its size."""
    try:
        name, found, length = member_at(chain)
    except HeaderError as exc:
        name, found, length = str(exc).encode(), -1, -1
    if (name, found, length) != (stored, size, len(chain)):
        raise FormatError(shard, f"member {member}", "the shard changed after it was indexed: "
                          "the tar header at the indexed offset does not match",
                          value=(name.decode("utf-8", "replace"), found),
                          expected=(member, size))


def _warn_truncated(indexes) -> None:
    for index in indexes:
        if index.truncated:
            warnings.warn(f"{index.shard}: truncated shard (no end-of-archive block where the "
                          f"headers end: cut short, or a header that lies about a size); "
                          f"{len(index)} samples indexed, members after the cut are lost",
                          stacklevel=3)
