"""Per-shard indexes of WebDataset tar shards: where each sample's image member lies.

A WebDataset shard is a plain tar file whose members are `<key>.<ext>`; consecutive members
with the same key form one sample (`a.jpg` + `a.cls`). The index of a shard holds, per
sample, the image member's name, data offset and size, and the label read from its `.cls`
(an integer) or `.json` (`{"label": int}`) member, all in numpy arrays. It is built on first
use from the `.idx` file DALI's `wds2idx` tool wrote beside a local shard, where there is one
(`dali_pipes.stores.wds2idx`: checked, and the tar headers of its first and last members
read to see that it describes this shard), else with a walk over the tar headers (Python's
`tarfile`); either way the same rules group members into samples. It is saved as
`<shard>.index.npz` next to the shard (or under `index_dir` where the shard's folder is not
writable) and rebuilt when the shard's size or mtime no longer match the ones it was built
from.

Labels: -1 means the sample has no label member, -2 a label member that is no integer, -3
(`.cls`) or -4 (`.json`) a label member larger than `MAX_LABEL_BYTES`; offset -1 means no
image member. Each sample also keeps where its image member's header chain starts (PAX or
GNU long-name headers in front of the plain header included), so a read can check the name
and size the tar really stores (`dali_pipes.stores.tar_header`). Samples without image or
label stay in the index (nothing is dropped silently): reading them raises, and `on_error`
decides. A damaged saved index (cut short, overwritten) is rebuilt, with a warning.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_kind import IMAGE_SUFFIXES
from dali_pipes.stores.local import LocalStore
from dali_pipes.stores.select import local_files
from dali_pipes.stores.wds2idx import (
    check_member_header,
    read_wds2idx,
    wds2idx_path,
    with_headers,
)

INDEX_VERSION = 3  # 2: JPEG 2000 members are images; 3: header chain offsets
IMAGE_EXTS = frozenset(suffix[1:] for suffix in IMAGE_SUFFIXES)
LABEL_EXTS = ("cls", "json")
NO_LABEL, BAD_LABEL, NO_IMAGE = -1, -2, -1
LABEL_TOO_BIG = {"cls": -3, "json": -4}
MAX_LABEL_BYTES = 16 << 20  # label members (.cls, .json) larger than this are not read
_KEY_EXT = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")  # webdataset's key/extension split
_FIELDS = ("names", "name_ends", "offsets", "sizes", "labels", "headers", "meta")


@dataclass(frozen=True)
class ShardIndex:
    """The samples of one shard, in member order."""

    shard: str
    shard_size: int
    shard_mtime_ns: int
    names: np.ndarray  # uint8: image member names (or the key, without one), concatenated
    name_ends: np.ndarray  # int64: end of each name in `names`
    offsets: np.ndarray  # int64: image member data offset, NO_IMAGE when none
    sizes: np.ndarray  # int64: image member size
    labels: np.ndarray  # int64: label, NO_LABEL, BAD_LABEL or a LABEL_TOO_BIG value
    headers: np.ndarray  # int64: where the image member's header chain starts
    ignored: int  # members that are neither an image nor a label
    truncated: bool  # the shard ends before its end-of-archive block

    def __len__(self) -> int:
        return len(self.offsets)

    def member(self, i: int) -> str:
        """The image member name of sample `i` (its key when it has no image)."""
        start = int(self.name_ends[i - 1]) if i else 0
        return bytes(self.names[start:int(self.name_ends[i])]).decode("utf-8",
                                                                       "surrogateescape")


def load_index(shard: str, *, index_dir: str | None = None, store=None) -> ShardIndex:
    """The index of `shard`: the cached one while it is fresh, else a new one (saved).

    Args:
        shard: a local tar file.
        index_dir: where indexes go when the shard's folder is not writable
            (default: ~/.cache/dali_pipes/tar_index).
        store: the store reading the shard (default LocalStore).

    Returns:
        The ShardIndex. FileNotFoundError for a missing shard; FormatError, naming the shard
        and the member, for a file that is no tar or has two members of one name.
    """
    store = store or LocalStore()
    size, mtime = store.stat(shard)
    for cached in _index_paths(shard, index_dir, store):
        index = _read_cached(cached, shard)
        if index is not None and (index.shard_size, index.shard_mtime_ns) == (size, mtime):
            return index
    index = build_index(shard, size=size, mtime_ns=mtime, store=store)
    for cached in _index_paths(shard, index_dir, store):
        if _save(index, cached):
            break
    return index


def build_index(shard: str, *, size: int, mtime_ns: int, store=None) -> ShardIndex:
    """Group the members of `shard` into samples (see module doc): from its `wds2idx`
    index where a local shard has one, else by walking its tar headers."""
    store = store or LocalStore()
    idx = wds2idx_path(shard) if local_files(store) else None
    found = _from_wds2idx(shard, idx, size, store) if idx else None
    groups, ignored, truncated = found or _walk(shard, size, store)
    names, offsets, sizes, labels, headers = [], [], [], [], []
    for key, members in groups:
        image = next((members[e] for e in members if e.lower() in IMAGE_EXTS), None)
        names.append((image[2] if image else key).encode("utf-8", "surrogateescape"))
        offsets.append(image[0] if image else NO_IMAGE)
        sizes.append(image[1] if image else 0)
        headers.append(image[4] if image else NO_IMAGE)
        labels.append(_label(members))
        ignored += len(members) - (image is not None) - any(e in members for e in LABEL_EXTS)
    ends = np.cumsum([len(n) for n in names], dtype=np.int64)
    return ShardIndex(shard, size, mtime_ns,
                      np.frombuffer(b"".join(names), dtype=np.uint8).copy(), ends,
                      np.asarray(offsets, np.int64), np.asarray(sizes, np.int64),
                      np.asarray(labels, np.int64), np.asarray(headers, np.int64),
                      int(ignored), truncated)


def _walk(shard: str, size: int, store) -> tuple[list, int, bool]:
    """[(key, {ext: (offset, size, name, label, header start)})] in member order, the count
    of ignored members and whether the shard is truncated."""
    with store.open(shard) as f:
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 (closed below)
        except tarfile.ReadError as exc:
            raise FormatError(shard, "tar header", f"not a tar file ({exc})") from exc
        with tar:
            groups, ignored, truncated = _group_members(tar, f, shard)
            truncated = truncated or missing_end(f, tar.offset, size)
    return groups, ignored, truncated


def _group_members(tar: tarfile.TarFile, f, shard: str) -> tuple[list, int, bool]:
    cut: list[bool] = []

    def files():
        while True:
            try:
                info = tar.next()
            except (tarfile.ReadError, EOFError):
                cut.append(True)
                return
            if info is None:
                return
            if info.isfile():
                yield info.name, info.offset_data, info.size, info.offset

    groups, ignored = _group(files(), shard, lambda offset, size: _read_label(f, offset, size))
    return groups, ignored, bool(cut)


def _from_wds2idx(shard: str, idx: str, size: int, store) -> tuple[list, int, bool] | None:
    """Members grouped as `_walk` groups them, from the `wds2idx` index `idx` (None for an
    index without member names). FormatError when the index does not describe the shard."""
    listed = read_wds2idx(idx, size)
    if listed is None:
        return None
    members = with_headers(listed)
    with store.open(shard) as f:
        for name, offset, member_size, head in (members[0], members[-1]):
            f.seek(head)
            check_member_header(f.read(offset - head), idx, shard, name, member_size)
        groups, ignored = _group(members, shard,
                                 lambda offset, n: _read_label(f, offset, n))
    return groups, ignored, False


def _group(members, shard: str, read_label) -> tuple[list, int]:
    """[(key, {ext: (offset, size, name, label bytes or size, header start)})] in member
    order and the count of ignored members, from (name, data offset, size, header start)
    of each regular file."""
    groups: list = []
    seen: set[str] = set()
    ignored = 0
    for name, offset, size, head in members:
        split = _KEY_EXT.match(name)
        if split is None or os.path.basename(name)[:1] == ".":
            ignored += 1
            continue
        key, ext = split.groups()
        if not groups or groups[-1][0] != key:
            if key in seen:
                raise FormatError(shard, f"member {name}", f"duplicate key {key!r}: "
                                  "its members are not consecutive (or it occurs twice)")
            seen.add(key)
            groups.append((key, {}))
        if ext in groups[-1][1]:
            raise FormatError(shard, f"member {name}", "duplicate member")
        label = read_label(offset, size) if ext in LABEL_EXTS else None
        groups[-1][1][ext] = (offset, size, name, label, head)
    return groups, ignored


def _read_label(f, offset: int, size: int) -> bytes | int | None:
    """The bytes of a label member; its size where it exceeds MAX_LABEL_BYTES (not read);
    None where the shard ends before."""
    if size > MAX_LABEL_BYTES:
        return size
    f.seek(offset)
    data = f.read(size)
    return data if len(data) == size else None


def missing_end(f, offset: int, size: int | None = None) -> bool:
    """Whether the archive lacks its end-of-archive zero block at `offset`, where
    `tarfile` stopped: a shorter file, or a header it could not parse (a member whose size
    field lies puts the next header in the middle of data), which `tarfile` takes for the
    end without a word."""
    if size is not None and offset > size:
        return True
    f.seek(offset)
    block = f.read(512)
    return len(block) < 512 or block.count(0) != 512


def _label(members: dict) -> int:
    for ext in LABEL_EXTS:
        if ext in members:
            data = members[ext][3]
            return LABEL_TOO_BIG[ext] if isinstance(data, int) else parse_label(data, ext)
    return NO_LABEL


def parse_label(data: bytes | None, ext: str) -> int:
    """The label in a `.cls` (an integer) or `.json` (`{"label": int}`) member; BAD_LABEL
    when it holds something else."""
    if data is None:
        return BAD_LABEL
    try:
        text = data.decode().strip()
        value = int(text) if ext == "cls" else json.loads(text)["label"]
    except (AttributeError, UnicodeDecodeError, ValueError, KeyError, TypeError,
            RecursionError):  # JSON nested deeper than the parser's recursion limit
        return BAD_LABEL
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return BAD_LABEL  # beyond int64 too: one bad sample, not an OverflowError
    return value


def _index_paths(shard: str, index_dir: str | None, store) -> list[Path]:
    """Where the index of `shard` is kept: beside a local shard (and in the cache, for a
    folder that cannot be written), in the cache only for a shard in any other store
    (keyed by the store's class and the shard's path)."""
    root = Path(index_dir) if index_dir else Path.home() / ".cache" / "dali_pipes" / "tar_index"
    local = local_files(store)
    name = os.path.abspath(shard) if local else \
        f"{type(store).__module__}.{type(store).__qualname__}:{shard}"
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    cache = root / f"{shard.rsplit('/', 1)[-1]}.{digest}.index.npz"
    return [Path(shard + ".index.npz"), cache] if local else [cache]


def _read_cached(path: Path, shard: str) -> ShardIndex | None:
    """The index saved at `path`; None when there is none, it is of another version, or
    it is damaged (cut, overwritten: a warning names it, and it is rebuilt)."""
    try:
        with open(path, "rb") as f, np.load(f) as z:  # numpy leaks its own on damage
            if int(z["meta"][0]) != INDEX_VERSION:
                return None
            arrays = {k: z[k] for k in _FIELDS}
        size, mtime, ignored, truncated = (int(v) for v in arrays.pop("meta")[1:])
        index = ShardIndex(shard, size, mtime, ignored=ignored, truncated=bool(truncated),
                           **arrays)
        _check_lengths(index)
    except OSError:  # none, or unreadable (a folder, no permission): not used
        return None
    except Exception as exc:  # noqa: BLE001 (zip, zlib, pickle refusals: any damage)
        warnings.warn(f"{path}: damaged shard index ({type(exc).__name__}: {exc}); "
                      "rebuilding it", stacklevel=3)
        return None
    return index


def _check_lengths(index: ShardIndex) -> None:
    n = len(index.offsets)
    if any(len(a) != n for a in (index.name_ends, index.sizes, index.labels, index.headers)) \
            or (n and int(index.name_ends[-1]) != len(index.names)):
        raise ValueError("its arrays do not have matching lengths")


def _save(index: ShardIndex, path: Path) -> bool:
    """Write atomically (a temporary file, then rename: safe with several ranks)."""
    meta = np.asarray([INDEX_VERSION, index.shard_size, index.shard_mtime_ns, index.ignored,
                       int(index.truncated)],
                      np.int64)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            np.savez(f, names=index.names, name_ends=index.name_ends, offsets=index.offsets,
                     sizes=index.sizes, labels=index.labels, headers=index.headers,
                     meta=meta)
        os.replace(tmp, path)
        return True
    except OSError:  # not writable, full, or no folder at all: the index is not kept
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False
