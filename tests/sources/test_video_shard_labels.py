"""Video shards take their labels from `.json` members of any size (a caption beside the
label), as image shards do."""
from __future__ import annotations

import io
import json
import tarfile

from dali_pipes.sources.video_shards import VideoShardSource
from dali_pipes.testing import tiny_data
from dali_pipes.testing.video_shards import write_video_shards


def test_a_json_label_with_a_long_caption_is_read(tmp_path):
    folder = tiny_data.video(tmp_path / "videos", 0)
    plain = write_video_shards(folder, tmp_path / "plain", per_shard=3, label="json")
    out = tmp_path / "captioned"
    out.mkdir()
    for shard in plain:
        with tarfile.open(shard) as src, tarfile.open(out / shard.name, "w") as dst:
            for member in src.getmembers():
                data = src.extractfile(member).read()
                if member.name.endswith(".json"):
                    doc = {**json.loads(data), "caption": "a long caption " * 700}
                    data = json.dumps(doc).encode()  # about 10 KB
                    member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
    want = VideoShardSource([str(p) for p in plain]).labels
    got = VideoShardSource(sorted(str(p) for p in out.glob("*.tar"))).labels
    assert (want >= 0).all() and got.tolist() == want.tolist()
