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

from dali_pipes.sources.folders import names_in
from dali_pipes.sources.frame_stores import (
    FRAME_MEMBER,
    FrameShardSource,
    RemoteFrameFolderSource,
)
from dali_pipes.sources.frames import TIMESTAMPS
from dali_pipes.sources.layout import data_layout
from dali_pipes.sources.shard_names import flatten, shard_sources
from dali_pipes.sources.shard_walk import WALK_CHUNK
from dali_pipes.sources.video import VIDEO_EXTENSIONS
from dali_pipes.sources.video_frames import FrameFolderSource, is_frame_folder_tree
from dali_pipes.stores import Store
from dali_pipes.stores.object_file import ObjectBytes
from dali_pipes.stores.select import open_store, store_paths


def frame_source(data, *, store: Store, **options):
    """The frame-folder source of `data` (local tree, class folders in another store, or
    shards).

    Args:
        data: as `make_loader` takes it.
        store: the store `data` is in (`dali_pipes.stores.select.resolve_store`).
        options: clip_length, stride, clips_per_video, crops (and max_pixels).
    """
    layout = data_layout(data, store)
    if layout.shards:
        return FrameShardSource(data, store=store, **options)
    if layout.objects is not None:
        return RemoteFrameFolderSource(data, store=store, objects=layout.objects, **options)
    return FrameFolderSource(data, **options)


def is_frame_data(data, store: Store | None = None) -> bool:
    """True when `data` holds frame folders: a local tree (`is_frame_folder_tree`), class
    folders of frame folders in another store, or frame-folder shards. Stores that cannot
    be read here say False, and the video kind's source reports the failure."""
    store = store or open_store(data)
    try:
        layout = data_layout(data, store)
        if layout.objects is not None:
            return any(_holds_clip_folder(root, found) for root, found in
                       zip(store_paths(data, store), layout.objects, strict=True))
        if not layout.shards:
            return is_frame_folder_tree(data)
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
