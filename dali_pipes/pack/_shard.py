"""One shard's work, the same in every engine: read its samples from SRC's store, write the
shard to DST, its index beside it (image shards in a local DST), then its record.

A job names everything it needs (`ShardJob`: members as bytes or `Ref`s of SRC's store), so
it runs in this process, a worker process of the local engine or a Ray task on another
machine, given the store and the destination (both pickle). The shard appears under its
final name only complete (`Destination.writer`); its record, written after it, says the
plan it belongs to, its samples, bytes and sha256, and on object storage the version
(ETag) the object had when written, which a rerun checks instead of reading it again.
"""
from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dali_pipes.pack._members import Member, read_member
from dali_pipes.pack._owned import dump_json
from dali_pipes.stores import Store
from dali_pipes.stores.destination import Destination
from dali_pipes.stores.shard_writer import write_tar
from dali_pipes.stores.tar_index import load_index

# Samples of a shard read at once, ahead of the one being written: an object store answers
# each GET after tens to hundreds of ms, which one read at a time would wait out in turn.
READ_AHEAD = 8


@dataclass(frozen=True)
class ShardJob:
    """Shard `name`: its samples `(key, members)` in order; `resize` (max side, JPEG
    quality) re-encodes each sample's first member (images) when larger; `plan` the plan's
    digest its record carries; `index`: build the shard's image index beside it (local
    DST: `dali_pipes.stores.tar_index`, what image shard sources read)."""

    name: str
    samples: list[tuple[str, list[Member]]]
    resize: tuple[int, int] | None
    plan: str
    index: bool = False


def pack_shard(job: ShardJob, store: Store, dest: Destination) -> dict:
    """Write `job`'s shard and its record; the record with the shard's name (`name`)."""
    def samples():
        for (key, members), data in zip(job.samples, read_ahead(store, job.samples),
                                        strict=True):
            if job.resize is not None:
                data[0] = encode(data[0], _name(members[0][1], key), *job.resize)
            yield key, data
    with dest.writer(job.name) as out:
        record = write_tar(out, samples())
    if dest.local is None:
        record["version"] = dest.stat(job.name)[1]
    elif job.index:
        load_index(str(dest.local / job.name))
    record["plan"] = job.plan
    dest.write(f"{job.name}.json", dump_json(record))
    return {"name": job.name, **record}


def read_ahead(store: Store, samples: Iterable[tuple[str, list[Member]]]
               ) -> Iterator[list[tuple[str, bytes]]]:
    """Each sample's members with their bytes, in order, READ_AHEAD samples read at once
    (threads: the reads wait on I/O; a failed read raises at its sample's turn)."""
    def read(members: list[Member]) -> list[tuple[str, bytes]]:
        return [(ext, read_member(store, blob)) for ext, blob in members]
    with ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="pack-read") as pool:
        window: deque = deque()
        try:
            for _, members in samples:
                window.append(pool.submit(read, members))
                if len(window) >= READ_AHEAD:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:
            for future in window:  # after a failure: the reads not started are dropped
                future.cancel()


def _name(blob, key: str) -> str:
    return getattr(blob, "path", key)


def encode(member: tuple[str, bytes], name: str, max_side: int, quality: int
           ) -> tuple[str, bytes]:
    """(extension, bytes): the image as it is, or re-encoded as a JPEG whose longer side is
    `max_side` when it is larger (ValueError naming `name` when it cannot be decoded)."""
    from PIL import Image
    ext, data = member
    try:
        with Image.open(io.BytesIO(data)) as image:
            if max(image.size) <= max_side:
                return ext, data
            scale = max_side / max(image.size)
            size = tuple(max(1, round(s * scale)) for s in image.size)
            small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    except Image.UnidentifiedImageError as exc:  # its message names a BytesIO's address
        raise ValueError(f"{name}: cannot be decoded to resize it (no image format PIL "
                         "reads)") from exc
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name}: cannot be decoded to resize it ({exc})") from exc
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=quality)
    return "jpg", buffer.getvalue()

