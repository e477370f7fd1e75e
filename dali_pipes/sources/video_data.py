"""Which video (or fusion) source reads `data`: local class folders, class folders in
another store (URLs of a listable store, a store handed in), or WebDataset shards (in
either)."""
from __future__ import annotations

from dali_pipes.sources.fusion import FusionFolderSource
from dali_pipes.sources.layout import data_layout
from dali_pipes.sources.video import VideoFolderSource
from dali_pipes.sources.video_shards import FusionShardSource, VideoShardSource
from dali_pipes.stores import Store


def video_source(data, *, store: Store, imu: dict | None = None, **clip_options):
    """The source of `data` (`imu`: the fusion options, for a fusion source).

    Args:
        data: a folder of class folders (or a list), folders of such in `store`
            (`s3://bucket/train/`), or shards as `ShardSource` takes them.
        store: the store `data` is in (`dali_pipes.stores.select.resolve_store`).
        imu: imu_offset, imu_method and max_gap for fusion; None for video.
        clip_options: clip_length, stride, clips_per_video, crops.
    """
    fusion = imu is not None
    options = {**clip_options, **(imu or {})}
    layout = data_layout(data, store)
    if layout.shards:
        shard_class = FusionShardSource if fusion else VideoShardSource
        return shard_class(data, store=store, **options)
    folder_class = FusionFolderSource if fusion else VideoFolderSource
    return folder_class(data, store=store, objects=layout.objects, **options)
