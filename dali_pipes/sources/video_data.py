"""Which video (or fusion) source reads `data`: local class folders, class folders behind
URLs of a listable store, or WebDataset shards (local or behind URLs)."""
from __future__ import annotations

from dali_pipes.sources.fusion import FusionFolderSource
from dali_pipes.sources.image import class_folder_objects
from dali_pipes.sources.shard_names import is_shard_data
from dali_pipes.sources.video import VideoFolderSource
from dali_pipes.sources.video_shards import FusionShardSource, VideoShardSource
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.select import remote_store


def video_source(data, *, remote: dict, imu: dict | None = None, **clip_options):
    """The source of `data` (`imu`: the fusion options, for a fusion source).

    Args:
        data: a folder of class folders (or a list), URLs of such folders
            (`s3://bucket/train/`), or shards as `ShardSource` takes them.
        remote: storage_options, cache_dir and cache_limit (None each when not given);
            ValueError when given for local data.
        imu: imu_offset, imu_method and max_gap for fusion; None for video.
        clip_options: clip_length, stride, clips_per_video, crops.
    """
    fusion = imu is not None
    options = {**clip_options, **(imu or {})}
    store = remote_store(data, StoreOptions(**remote))
    if is_shard_data(data):
        objects = class_folder_objects(data, store) if store is not None else None
        if store is not None and objects is not None:
            folder_class = FusionFolderSource if fusion else VideoFolderSource
            return folder_class(data, store=store, objects=objects, **options)
        shard_class = FusionShardSource if fusion else VideoShardSource
        return shard_class(data, store=store, remote=remote, **options)
    return (FusionFolderSource if fusion else VideoFolderSource)(data, **options)
