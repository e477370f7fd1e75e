"""Video and fusion from WebDataset shards (local, S3 on moto, HTTP) and from class folders in
S3: the loader contract on shards, the same batches as the local folder on both backends,
clips read with byte ranges, and bad objects named under on_error."""
from __future__ import annotations

import io
import re
import shutil
import tarfile
from pathlib import Path

import av
import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.video import probe_video
from dali_pipes.sample_data.sample_video import write_video
from dali_pipes.sample_data.video_shards import write_video_shards
from dali_pipes.sources.protocol import ClipRead, DecodedClipRead
from dali_pipes.sources.video import VideoFolderSource
from dali_pipes.sources.video_shards import VideoShardSource
from dali_pipes.stores.remote import FsspecStore, StoreError
from tests.conftest import TinyData
from tests.stores.servers import MotoS3, RangeServer
from tests.stores.test_s3_folders import _upload
from tests.torch_bridge import test_video_loader
from torch_bridge import SampleError, make_loader
from torch_bridge.testing.loader_contract import assert_same, copies

SHARDS = "train-{000000..000002}.tar"
_UPLOADED: dict = {}  # (server, shard folders) -> their URLs


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


@pytest.fixture(scope="module")
def video_shards(tiny_data, tmp_path_factory) -> list[Path]:
    """The tiny video data sets (two sources) as shards, 2 videos per shard."""
    base = tmp_path_factory.mktemp("video_shards")
    return [Path(write_video_shards(folder, base / f"shards_{i}")[0]).parent
            for i, folder in enumerate(tiny_data("video").two)]


def _garble_video_member(source, index: int) -> None:
    """Zero the first bytes of sample `index`'s video member inside its shard (same size:
    the tar stays valid, the container header is gone)."""
    sample = source.samples[index // source.views_per_video]
    name, offset, size = sample.member(("webm", "mp4", "mkv", "avi"))
    with open(sample.shard, "r+b") as f:
        f.seek(offset)
        f.write(b"\x00" * min(64, size))


class _VideoShardContract(test_video_loader.TestVideoContract):
    """The video contract over shards of the tiny video data sets (run over S3 below; local
    shards go through the same code with a LocalStore, compared with the folder below)."""
    runs_key = "video-shards"  # cached apart from the video runs

    @pytest.fixture
    def tiny(self, video_shards):
        return TinyData("video", video_shards[0], list(video_shards))

    def break_samples(self, root, modality):
        _garble_video_member(modality.source, 1)
        return {1}, re.escape(modality.path(1)), "video_stream"



class TestVideoS3ShardContract(_VideoShardContract):
    """The same contract over those shards in S3 (moto), read through fsspec."""
    runs_key = "video-s3-shards"  # cached apart from the local shards' runs

    @pytest.fixture
    def tiny(self, video_shards, s3, monkeypatch, tmp_path_factory):
        monkeypatch.setenv("HOME", str(tmp_path_factory.getbasetemp() / "s3_home"))
        key = (id(s3), tuple(video_shards))
        if key not in _UPLOADED:  # once per server: uploads cost seconds
            _UPLOADED[key] = [s3.upload(folder, "videos", f"source{i}")
                              for i, folder in enumerate(video_shards)]
        urls = _UPLOADED[key]
        data = TinyData("video", urls[0], urls)
        data.options["storage_options"] = s3.options
        self._s3, self._local = s3, video_shards[0]
        return data

    def _count(self, tiny, data=None) -> int:
        return len(VideoShardSource(tiny.one if data is None else data, store=FsspecStore(
            storage_options=tiny.options["storage_options"])))

    def _broken(self, tiny, backend, tmp_path, on_error):
        local = Path(shutil.copytree(self._local, tmp_path / "shards"))
        _garble_video_member(VideoShardSource(local), 1)
        url = self._s3.upload(local, "videos", f"broken-{tmp_path.name}")
        loader = tiny.loader(backend, data=url, on_error=on_error, shuffle=False)
        return loader, {1}, re.escape(loader._engine.modality.path(1)), "video_stream"


# -- every store against the local folder -------------------------------------------------

@pytest.fixture(scope="module")
def served(tiny_data, tmp_path_factory, s3):
    """The tiny fusion folder (videos + IMU) locally, as local shards (labels in .json),
    in S3 as class folders and as shards, and behind an HTTP server as shards."""
    folder = tiny_data("fusion").one
    shards = tmp_path_factory.mktemp("fusion_shards")
    write_video_shards(folder, shards, label="json")
    with RangeServer(shards) as http:
        yield {"folder": folder, "local shards": shards,
               "s3 folders": _upload(s3, folder, "fusion", "train"),
               "s3 shards": s3.upload(shards, "fusion", "shards") + SHARDS,
               "http shards": f"{http.url}/{SHARDS}"}


def _opts(backend: str, data, s3) -> dict:
    opts = {"backend": backend, "batch_size": 2, "clip_length": 4, "stride": 2, "size": 16,
            "seed": 3}
    if "s3://" in str(data):
        opts["storage_options"] = s3.options
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    return opts


@pytest.mark.parametrize("modality", ["video", "fusion"])
def test_every_store_gives_the_local_batches(served, s3, backend, modality, monkeypatch,
                                             tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    want = copies(make_loader(modality, served["folder"], **_opts(backend, "", s3)))
    assert len(want) == 3
    for where in ("local shards", "s3 folders", "s3 shards", "http shards"):
        data = served[where]
        got = copies(make_loader(modality, data, **_opts(backend, data, s3)))
        assert_same(got, want)
    cached = dict(cache_dir=str(tmp_path / "cache"), cache_limit=4 << 20)
    for _ in range(2):  # cold, then warm
        data = served["s3 shards"]
        assert_same(copies(make_loader(modality, data, **cached, **_opts(backend, data, s3))), want)


def test_fusion_resumes_mid_epoch_from_s3_shards(served, s3, backend, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    data = served["s3 shards"]
    loader = make_loader("fusion", data, **_opts(backend, data, s3))
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    rest = copies(it)
    resumed = make_loader("fusion", data, **_opts(backend, data, s3))
    resumed.load_state_dict(state)
    assert_same(copies(resumed), rest)


def _bad_label_shards(shards: Path, out: Path) -> Path:
    """A copy of the shards whose second sample's .json label is no JSON."""
    out.mkdir()
    for shard in sorted(shards.glob("*.tar")):
        with tarfile.open(shard) as src, tarfile.open(out / shard.name, "w") as dst:
            for member in src.getmembers():
                data = src.extractfile(member).read()
                if member.name == "class_1_vid_0001.json":
                    data, member.size = b"{label: 1", 9
                dst.addfile(member, io.BytesIO(data))
    return out


def test_bad_objects_are_named_under_on_error(served, s3, backend, monkeypatch, tmp_path):
    """A remote video whose container header is damaged, a shard whose label JSON is
    malformed: "raise" names the object and the field, "skip" leaves those samples out."""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = Path(shutil.copytree(served["folder"], tmp_path / "train"))
    video = sorted(folder.glob("class_0/*.webm"))[1]  # sample 1 in listing order
    data = bytearray(video.read_bytes())
    data[:64] = bytes(64)
    video.write_bytes(bytes(data))
    damaged = _upload(s3, folder, "damaged", tmp_path.name)
    labels = s3.upload(_bad_label_shards(served["local shards"], tmp_path / "shards"),
                       "damaged", f"labels-{tmp_path.name}") + SHARDS
    cases = ((damaged, 1, re.escape(f"{damaged}class_0/vid_0002.webm"), "video_stream"),
             (labels, 3, r"class_1_vid_0001\.json", "field \"label\""))
    for url, bad, where, field in cases:
        opts = dict(_opts(backend, url, s3), shuffle=False)
        with pytest.raises(SampleError, match=rf"sample {bad} \(.*{where}.*{field}"):
            list(make_loader("video", url, **opts))
        loader = make_loader("video", url, on_error="skip", **opts)
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == sorted(set(range(5)) - {bad})
        assert [s.index for s in loader.skipped] == [bad]


def test_a_dead_server_fails_the_read_naming_the_shard(served, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    shards = Path(shutil.copytree(served["local shards"], tmp_path / "shards"))
    with RangeServer(shards) as http:
        url = f"{http.url}/{SHARDS}"
        source = VideoShardSource(url, clip_length=4, store=FsspecStore(retries=1,
                                                                         backoff=0.01,
                                                                         timeout=5))
    with pytest.raises(StoreError, match=re.escape(http.url) + r".*train-000000\.tar"):
        source.info(0)


# -- bytes fetched per clip ------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_mp4(tmp_path_factory) -> Path:
    """8 s of 160x120 H.264 at 25 fps, a keyframe every 25 frames, in class folders."""
    if "libx264" not in av.codecs_available:
        pytest.skip("PyAV has no libx264 encoder")
    root = tmp_path_factory.mktemp("mp4") / "train"
    pixels = np.random.default_rng(1).integers(0, 256, (200, 120, 160, 3), np.uint8)
    write_video(root / "class_0" / "long.mp4", pixels, codec="libx264", gop=25)
    return root


def test_a_clip_fetches_its_packets_not_the_file(long_mp4, s3, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    path = long_mp4 / "class_0" / "long.mp4"
    local = VideoFolderSource(long_mp4, clip_length=8)
    url = _upload(s3, long_mp4, "mp4", tmp_path.name)
    source = VideoFolderSource(url, clip_length=8, store=FsspecStore(storage_options=s3.options))
    size = path.stat().st_size
    info, want = source.info(0), probe_video(path)
    assert (info.pts == want.pts).all() and (info.keyframes == want.keyframes).all()
    probed = source.fetched()[0]
    assert probed < 0.3 * size  # the MP4 index, not the packets
    source.info(0)
    assert source.fetched()[0] == probed  # probed once
    frames = np.arange(110, 118)
    clip = source.read(0, DecodedClipRead(frames))
    assert (clip == local.read(0, DecodedClipRead(frames))).all()
    per_clip = source.fetched()[0] - probed
    assert per_clip < 0.5 * size  # two keyframe intervals of eight, at most, and read-ahead
    segment, start = source.read(0, ClipRead(frames))
    # the same packets (Matroska's segment UID is random: compare sizes)
    want_segment, want_start = local.read(0, ClipRead(frames))
    assert len(segment) == len(want_segment) and start == want_start
    assert source.fetched()[0] - probed <= 2 * per_clip  # the header from memory
    with pytest.raises(FormatError, match=r"bad.*long\.mp4"):
        _damaged_probe(s3, long_mp4, tmp_path)


def _damaged_probe(s3, root: Path, tmp_path: Path):
    """Probe an MP4 whose index (the moov box) is cut off: FormatError on the container."""
    bad = Path(shutil.copytree(root, tmp_path / "bad"))
    mp4 = bad / "class_0" / "long.mp4"
    data = mp4.read_bytes()
    moov = data.find(b"moov")
    mp4.write_bytes(data[:moov + 16] + bytes(len(data) - moov - 16))
    url = _upload(s3, bad, "mp4", f"bad-{tmp_path.name}")
    VideoFolderSource(url, store=FsspecStore(storage_options=s3.options)).info(0)
