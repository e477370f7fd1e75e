"""Which frame-folder source reads `data`, and whether `data` holds frame folders at all
(local trees, class folders of frame folders behind URLs, or shards the pack tool wrote with
`--modality frames`), so `make_loader("video", ...)` picks the frame-folder kind there too.

Telling frames from videos behind URLs costs one listing call (class folders; the source
lists again) or the first member header of the first shard (a frame shard's first member is
`<key>.frame_000000.jpg` or `<key>.timestamps.npy`).
"""
from __future__ import annotations

import os
import tarfile
from collections.abc import Mapping
from typing import Any

from dali_pipes.frames import TIMESTAMPS
from dali_pipes.sources.folders import names_in
from dali_pipes.sources.frame_stores import (
    FRAME_MEMBER,
    FrameShardSource,
    RemoteFrameFolderSource,
)
from dali_pipes.sources.image import class_folder_objects, remote_roots
from dali_pipes.sources.shard_names import flatten, is_shard_data, shard_sources
from dali_pipes.sources.shard_walk import WALK_CHUNK
from dali_pipes.sources.store_file import ObjectBytes
from dali_pipes.sources.video import VIDEO_EXTENSIONS
from dali_pipes.sources.video_frames import FrameFolderSource, is_frame_folder_tree
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.select import open_store, remote_store

REMOTE_OPTIONS = ("storage_options", "cache_dir", "cache_limit")


def frame_source(data, *, remote: dict, **options):
    """The frame-folder source of `data` (local tree, URLs of class folders, or shards).

    Args:
        data: as `make_loader` takes it.
        remote: storage_options, cache_dir and cache_limit (None each when not given);
            ValueError when given for local data.
        options: clip_length, stride, clips_per_video, crops (and max_pixels).
    """
    store = remote_store(data, StoreOptions(**remote))
    if is_shard_data(data):
        objects = class_folder_objects(data, store) if store is not None else None
        if store is not None and objects is not None:
            return RemoteFrameFolderSource(data, store=store, objects=objects, **options)
        return FrameShardSource(data, store=store, remote=remote, **options)
    return FrameFolderSource(data, **options)


def is_frame_data(data, options: Mapping[str, Any] | None = None) -> bool:
    """True when `data` holds frame folders: a local tree (`is_frame_folder_tree`), class
    folders of frame folders behind URLs, or frame-folder shards. `options`: make_loader's
    modality options (their storage_options reach the store). Stores that cannot be read
    here say False, and the video kind's source reports the failure."""
    if not is_shard_data(data):
        return is_frame_folder_tree(data)
    options = options or {}
    given = {k: options[k] for k in REMOTE_OPTIONS if k in options}
    try:
        remote = remote_store(data, StoreOptions(**given))
        store = remote or open_store(data)
        objects = class_folder_objects(data, remote) if remote is not None else None
        if objects is not None:
            return any(_holds_clip_folder(root, found) for root, found in
                       zip(remote_roots(data), objects, strict=True))
        return _first_member_is_a_frame(flatten(shard_sources(data, store))[0], store)
    except (OSError, ValueError, IndexError, tarfile.TarError):
        return False


def _holds_clip_folder(root: str, objects) -> bool:
    prefix = root.rstrip("/") + "/"
    return any(u.startswith(prefix) and u[len(prefix):].count("/") == 2
               and u.endswith("/" + TIMESTAMPS) for u, _, _ in objects)


def _first_member_is_a_frame(shard: str, store) -> bool:
    obj = ObjectBytes(store, shard, int(store.stat(shard)[0]), chunk=WALK_CHUNK)
    with obj.open() as f, tarfile.open(fileobj=f, mode="r:") as tar:
        info = tar.next()
    if info is None:
        return False
    ext = info.name.rsplit("/", 1)[-1].partition(".")[2]
    return ext == TIMESTAMPS or FRAME_MEMBER.match(ext) is not None


def holds_video(data) -> bool:
    """Whether the folder `data` holds frame folders, or class folders of clips without IMU
    streams beside them (those are fusion data)."""
    if is_frame_folder_tree(data):
        return True
    inside = names_in(data, 1)
    return (not any(n.endswith(".imu.csv") for n in inside)
            and any(os.path.splitext(n)[1].lower() in VIDEO_EXTENSIONS for n in inside))
