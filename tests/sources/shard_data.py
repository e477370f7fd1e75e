"""Test data: image class folders written as WebDataset shards by the real `webdataset`
package (its ShardWriter), samples in the folder listing's order, labels = class ids."""
from __future__ import annotations

from pathlib import Path

from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.sources.protocol import STORED


def write_shards(folder: Path, out: Path, *, per_shard: int = 4, label_ext: str = "cls",
                 pattern: str = "train-%06d.tar") -> Path:
    """The images of `folder` as shards `out/train-000000.tar`, ... of `per_shard` samples.

    Args:
        folder: a folder of class folders of images.
        out: the folder to write (created).
        per_shard: samples per shard.
        label_ext: "cls" (an integer) or "json" ({"label": int}).
        pattern: the ShardWriter file name pattern.

    Returns:
        `out`.
    """
    import webdataset as wds

    source = ImageFolderSource(folder)
    out.mkdir(parents=True, exist_ok=True)
    with wds.ShardWriter(str(out / pattern), maxcount=per_shard, verbose=0) as writer:
        for i in range(len(source)):
            label = int(source.labels[i])
            ext = Path(source.path(i)).suffix.lower().lstrip(".")
            writer.write({"__key__": f"sample{i:06d}", ext: bytes(source.read(i, STORED).data),
                          label_ext: label if label_ext == "cls" else {"label": label}})
    return out
