"""Writing WebDataset tar shards deterministically: the shard plan and one shard's bytes.

The plan is a pure function of the source's sample sizes: samples in listing order, a new
shard whenever the next sample would take the shard past `shard_size` bytes, so any part of
a cluster job (`--part i/N`) knows every shard's samples without talking to the others.
A shard's bytes depend only on its samples: fixed member metadata (mtime 0, owner 0,
mode 0644), members `<key>.<ext>` then `<key>.cls`, keys the zero-padded sample index.
`write_tar` streams a shard into any binary file (a local temporary file, an S3 upload:
`dali_pipes.stores.destination`), one sample in memory at a time.
"""
from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dali_pipes.stores.destination import HOST, LocalDestination, temp_name
from dali_pipes.stores.tar_index import load_index

__all__ = ["HOST", "ShardPlan", "part_shards", "plan_shards", "shard_name", "temp_name",
           "write_sample_shard", "write_shard", "write_tar"]


@dataclass(frozen=True)
class ShardPlan:
    """Shard `j` holds samples `starts[j]:starts[j + 1]` of the listing."""

    starts: np.ndarray  # int64, len = shards + 1

    def __len__(self) -> int:
        return len(self.starts) - 1

    def samples(self, shard: int) -> range:
        """The listing indices of shard `shard`."""
        return range(int(self.starts[shard]), int(self.starts[shard + 1]))


def plan_shards(sizes: np.ndarray, shard_size: int) -> ShardPlan:
    """Cut samples of `sizes` bytes (in order) into shards of at most `shard_size` bytes
    (a sample larger than that gets a shard of its own).

    Args:
        sizes: bytes of each sample (int64).
        shard_size: the most bytes of sample data in one shard (> 0).

    Returns:
        The ShardPlan; ValueError for a shard_size <= 0.
    """
    if shard_size <= 0:
        raise ValueError(f"shard_size must be > 0, got {shard_size}")
    starts, used = [0], 0
    for i, size in enumerate(np.asarray(sizes, np.int64).tolist()):
        if used and used + size > shard_size:
            starts.append(i)
            used = 0
        used += size
    starts.append(len(sizes))
    return ShardPlan(np.asarray(starts if len(sizes) else [0], np.int64))


def part_shards(n_shards: int, part: int, parts: int) -> list[int]:
    """The shards part `part` of `parts` writes: every `parts`-th, starting at `part`."""
    if not 0 <= part < parts:
        raise ValueError(f"--part {part}/{parts}: expected 0 <= i < N")
    return list(range(part, n_shards, parts))


def shard_name(shard: int) -> str:
    return f"shard-{shard:06d}.tar"


def write_shard(path: str, members: list[tuple[str, str, bytes, int]]) -> dict:
    """Write one shard of images with their `.cls` labels atomically, and index it.

    Args:
        path: the shard to write (under `temp_name(path)` until complete, then renamed).
        members: (key, image extension, image bytes, label) per sample, in order.

    Returns:
        {"samples", "bytes", "sha256"} of the written shard.
    """
    record = write_sample_shard(path, [(key, [(ext, data), ("cls", str(int(label)).encode())])
                                       for key, ext, data, label in members])
    load_index(path)
    return record


def write_sample_shard(path: str, samples: list[tuple[str, list[tuple[str, bytes | str]]]]
                       ) -> dict:
    """Write one local shard of `(key, [(extension, bytes or a file to copy), ...])`
    atomically (under `temp_name(path)` until complete, then renamed) and deterministically
    (`write_tar`).

    Returns:
        {"samples", "bytes", "sha256"} of the written shard.
    """
    folder, name = os.path.split(os.fspath(path))
    with LocalDestination(folder or ".").writer(name) as f:
        return write_tar(f, ((key, [(ext, data if isinstance(data, bytes)
                                     else Path(data).read_bytes()) for ext, data in members])
                             for key, members in samples))


def write_tar(out, samples: Iterable[tuple[str, list[tuple[str, bytes]]]]) -> dict:
    """Stream the samples `(key, [(extension, bytes), ...])` into the binary file `out` as a
    tar (USTAR, member metadata fixed: mtime 0, owner 0, mode 0644), taking one sample at a
    time from `samples`.

    Returns:
        {"samples", "bytes", "sha256"} of what was written.
    """
    writer = _HashingFile(out, hashlib.sha256())
    count = 0
    with tarfile.open(fileobj=writer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in samples:
            count += 1
            for ext, data in members:
                _add(tar, f"{key}.{ext}", data)
    return {"samples": count, "bytes": writer.size, "sha256": writer.digest.hexdigest()}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


class _HashingFile:
    """A write-only file that also feeds a hash (tarfile writes through it)."""

    def __init__(self, raw, digest):
        self.raw, self.digest, self.size = raw, digest, 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.size += len(data)
        self.raw.write(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def read(self, size: int) -> bytes:
        raise io.UnsupportedOperation("write-only shard stream")

    def seek(self, pos: int) -> int:
        raise io.UnsupportedOperation("write-only shard stream")

    def close(self) -> None:
        """Nothing: the raw file belongs to the caller, who closes it."""
