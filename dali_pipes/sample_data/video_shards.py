"""WebDataset shards of a video (or fusion) class-folder tree, for tests and studies.

`write_video_shards(folder, out)` writes `out/train-000000.tar`, ... holding the videos of
`folder` in the order `VideoFolderSource` lists them (so sample i of the shards is sample i of
the folder): members `<class>_<stem>.<ext>`, the label as `.cls` (or `.json`) and, beside a
video that has one, its `<stem>.imu.csv` as `<key>.imu.csv`.
"""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from dali_pipes.formats.imu import imu_path_for
from dali_pipes.sources.folders import list_class_folders
from dali_pipes.sources.video import VIDEO_EXTENSIONS


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 0
    tar.addfile(info, io.BytesIO(data))


def write_video_shards(folder: Path, out: Path, *, per_shard: int = 2,
                       label: str = "cls") -> list[Path]:
    """The shards written (`label`: "cls" or "json")."""
    listing = list_class_folders(folder, VIDEO_EXTENSIONS, "video")
    out.mkdir(parents=True, exist_ok=True)
    shards: list[Path] = []
    files = list(listing.files)
    for start in range(0, len(files), per_shard):
        shard = out / f"train-{len(shards):06d}.tar"
        with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(start, min(start + per_shard, len(files))):
                video = Path(files[i])
                key = f"{video.parent.name}_{video.stem}"
                _add(tar, key + video.suffix.lower(), video.read_bytes())
                value = int(listing.labels[i])
                _add(tar, f"{key}.{label}", (str(value) if label == "cls" else
                                             json.dumps({"label": value})).encode())
                imu = imu_path_for(video)
                if imu.is_file():
                    _add(tar, f"{key}.imu.csv", imu.read_bytes())
        shards.append(shard)
    return shards
