"""Frame folders (the video modality over extracted JPEGs) from shards the pack tool writes
(local, S3 on moto, HTTP) and from class folders in S3: the same clips, timestamps and labels
as the local tree on both backends, and bad members named under on_error."""
from __future__ import annotations

import io
import re
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.pack import pack
from dali_pipes.sources.frame_data import is_frame_data
from dali_pipes.sources.frame_stores import FrameShardSource, RemoteFrameFolderSource
from dali_pipes.sources.protocol import ClipRead
from dali_pipes.sources.video_frames import FrameFolderSource
from dali_pipes.stores.remote import FsspecStore
from tests.conftest import TinyData
from tests.stores.servers import MotoS3, RangeServer
from tests.stores.test_s3_folders import _upload
from tests.torch_bridge import test_video_frames
from torch_bridge import SampleError, make_loader
from torch_bridge.modalities.video_frames import FrameFolderModality
from torch_bridge.testing.loader_contract import assert_same, copies


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


@pytest.fixture(scope="module")
def served(tiny_data, tmp_path_factory, s3):
    """The tiny frame-folder tree locally, packed into shards (about 2 clips per shard) kept
    locally, in S3 and behind an HTTP server, and uploaded as class folders to S3."""
    folder = tiny_data("frames").one
    shards = tmp_path_factory.mktemp("frame_shards")
    pack(folder, shards, modality="frames", shard_size=40_000, progress=False)
    names = sorted(p.name for p in shards.glob("*.tar"))
    assert len(names) >= 2
    pattern = f"shard-{{000000..{len(names) - 1:06d}}}.tar"
    with RangeServer(shards) as http:
        yield {"folder": folder, "local shards": shards,
               "s3 folders": _upload(s3, folder, "frames", "train"),
               "s3 shards": _upload(s3, shards, "frameshards", "shards"),
               "http shards": f"{http.url}/{pattern}"}


@pytest.fixture(scope="module")
def frame_shards(tiny_data, tmp_path_factory) -> list[Path]:
    """The two tiny frame-folder sources packed into shards, a few clips per shard."""
    base = tmp_path_factory.mktemp("frame_contract")
    for i, folder in enumerate(tiny_data("frames").two):
        pack(folder, base / f"shards_{i}", modality="frames", shard_size=40_000,
             progress=False)
    return [base / "shards_0", base / "shards_1"]


def _garble_frames(source, index: int) -> None:
    """Overwrite the first bytes of every frame member of sample `index` inside its shard
    (same sizes: the tar stays valid, the JPEGs do not)."""
    sample = source.samples[index // source.views_per_video]
    for ext, (_, offset, size) in sample.members.items():
        if ext.endswith(".jpg"):
            with open(sample.shard, "r+b") as f:
                f.seek(offset)
                f.write(b"\x00" * min(64, size))


class TestFramesShardContract(test_video_frames.TestFramesContract):
    """The frame-folder loader contract (plan, resume, sharding, sources, on_error) over
    pack-tool shards; local shards (the store is the only difference from S3 or HTTP
    shards, whose batches the tests below compare with the local tree's)."""
    runs_key = "frames-shards"  # cached apart from the frames runs

    @pytest.fixture
    def tiny(self, frame_shards):
        return TinyData("frames", frame_shards[0], list(frame_shards))

    def break_samples(self, root, modality):
        _garble_frames(modality.source, 1)
        return {1}, re.escape(modality.path(1)), "SOI|JPEG|marker"


def _opts(backend: str, data, s3, **kw) -> dict:
    opts = {"backend": backend, "batch_size": 2, "clip_length": 4, "stride": 2, "size": 16,
            "seed": 3, **kw}
    if "s3://" in str(data):
        opts["storage_options"] = s3.options
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    return opts


def test_every_store_gives_the_local_frame_batches(served, s3, backend, monkeypatch,
                                                   tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    want = copies(make_loader("video", served["folder"], **_opts(backend, "", s3)))
    assert len(want) == 3
    for where in ("local shards", "s3 folders", "s3 shards", "http shards"):
        data = served[where]
        loader = make_loader("video", data, **_opts(backend, data, s3))
        assert isinstance(loader._engine.modality, FrameFolderModality), where
        assert_same(copies(loader), want)
    cached = dict(cache_dir=str(tmp_path / "cache"), cache_limit=4 << 20)
    data = served["s3 folders"]  # through the block cache
    assert_same(copies(make_loader("video", data, **cached, **_opts(backend, data, s3))), want)


def test_sources_list_the_local_clips_labels_and_timestamps(served, s3):
    local = FrameFolderSource(served["folder"])
    store = FsspecStore(storage_options=s3.options)
    for source in (FrameShardSource(served["local shards"]),
                   RemoteFrameFolderSource(served["s3 folders"], store=store),
                   FrameShardSource(served["s3 shards"], store=store)):
        assert len(source) == len(local) == 5
        assert (source.labels == local.labels).all()
        for i in range(len(local)):
            assert (source.all_timestamps(i) == local.all_timestamps(i)).all()
            frames = np.array([0, 3, 3])
            assert [j.tobytes() for j in source.read(i, ClipRead(frames)).data] == \
                [j.tobytes() for j in local.read(i, ClipRead(frames)).data]
    assert FrameShardSource(served["local shards"]).classes == local.classes  # the manifest


def test_frame_data_is_told_from_video_data(served, s3, tiny_data, tmp_path):
    store = FsspecStore(storage_options=s3.options)
    for where in ("folder", "local shards", "http shards"):
        assert is_frame_data(served[where]), where
    for where in ("s3 folders", "s3 shards"):
        assert is_frame_data(served[where], store), where
    videos = tiny_data("video").one
    pack(videos, tmp_path / "videos", modality="video", progress=False)
    assert not is_frame_data(videos) and not is_frame_data(tmp_path / "videos")
    assert not is_frame_data(_upload(s3, videos, "videos-told", "train"), store)


def _without_timestamps(shards: Path, out: Path) -> Path:
    """A copy of the shards whose second sample has no timestamps member."""
    out.mkdir()
    for shard in sorted(shards.glob("*.tar")):
        with tarfile.open(shard) as src, tarfile.open(out / shard.name, "w") as dst:
            for member in src.getmembers():
                if member.name != "000000001.timestamps.npy":
                    dst.addfile(member, io.BytesIO(src.extractfile(member).read()))
    return out


def test_bad_members_are_named_under_on_error(served, s3, backend, monkeypatch, tmp_path):
    """A frame object in S3 that is no JPEG, a shard sample without timestamps: "raise"
    names the object or member, "skip" leaves that sample out."""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = Path(shutil.copytree(served["folder"], tmp_path / "train"))
    bad_clip = sorted(p for p in (folder / "class_0").iterdir())[1]  # sample 1
    for jpeg in bad_clip.glob("*.jpg"):
        jpeg.write_bytes(b"not a jpeg" * 20)
    damaged = _upload(s3, folder, "damaged-frames", tmp_path.name)
    shards = _upload(s3, _without_timestamps(served["local shards"], tmp_path / "shards"),
                     "damaged-shards", tmp_path.name)
    clip = re.escape(f"{damaged}class_0/{bad_clip.name}/frame_")
    cases = ((damaged, clip, "SOI|JPEG|marker"),
             (shards, r"shard-000000\.tar:000000001", "timestamps.npy.*missing"))
    for url, where, field in cases:
        opts = _opts(backend, url, s3, shuffle=False)
        with pytest.raises(SampleError, match=rf"sample 1 \(.*{where}.*({field})"):
            list(make_loader("video", url, **opts))
        loader = make_loader("video", url, on_error="skip", **opts)
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == [0, 2, 3, 4]
        assert [s.index for s in loader.skipped] == [1]


def test_a_shard_sample_without_a_frame_names_the_member(served, tmp_path):
    source = FrameShardSource(served["local shards"], clip_length=4)
    source._frames[0].pop(2)
    with pytest.raises(FormatError, match=r"shard-000000\.tar:000000000/frame_000002\.jpg"):
        source.read(0, ClipRead(np.array([0, 2])))
