"""Hostile tar shards: a JSON label nested past the parser's recursion limit is one bad
sample; a member whose size field lies (the next header lands in its data) is reported as a
cut shard instead of ending the listing without a word; video shards read a `.json` label
of any size, as image shards do."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from dali_pipes.formats.coco import parse_coco
from dali_pipes.formats.errors import FormatError
from dali_pipes.sources.shard_members import list_shard
from dali_pipes.sources.shard_walk import walk_samples
from dali_pipes.stores.local import LocalStore
from tests.sources.test_shards import _samples, _write
from torch_bridge import make_loader

DEEP = b"[" * 100_000 + b"]" * 100_000


def _loader(root, backend, **kw):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader("image", root, backend=backend, batch_size=4, size=16, shuffle=False,
                       **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_deeply_nested_json_label_is_one_bad_sample(tmp_path, backend):
    samples = _samples(4)
    del samples[1]["cls"]
    samples[1]["json"] = b'{"label": 1, "x": ' + DEEP + b"}"
    _write(tmp_path / "a.tar", samples)
    loader = _loader(tmp_path, backend, on_error="skip")
    assert [i for b in loader for i in b["index"].tolist()] == [0, 2, 3]
    assert [s.index for s in loader.skipped] == [1]
    assert "not an integer" in loader.skipped[0].reason


def _lying_shard(path: Path, names: list[str], payload: bytes) -> Path:
    """A USTAR shard whose first member's size field says 100 bytes (it holds more)."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name in names:
            data = payload if not name.endswith((".cls", ".json")) else b"1"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = bytearray(path.read_bytes())
    raw[124:136] = b"%011o\0" % 100
    raw[148:156] = b" " * 8
    raw[148:156] = b"%06o\0 " % sum(raw[:512])
    path.write_bytes(bytes(raw))
    return path


def test_an_image_shard_with_a_lying_size_field_warns_that_members_are_lost(tmp_path):
    _write(tmp_path / "ok.tar", _samples(4))
    payload = _samples(1)[0]["jpg"]
    names = [n for i in range(4) for n in (f"k{i}.jpg", f"k{i}.cls")]
    _lying_shard(tmp_path / "ok.tar", names, payload)
    with pytest.warns(UserWarning, match=r"ok\.tar: truncated shard"):
        _loader(tmp_path, "torch", on_error="skip")


@pytest.mark.parametrize("walk", ["members", "detection"])
def test_member_walks_report_a_lying_size_field_as_a_cut(tmp_path, walk):
    names = [n for i in range(3) for n in (f"k{i}.mp4", f"k{i}.json")]
    shard = str(_lying_shard(tmp_path / "v.tar", names, b"\x01" * 3000))
    with pytest.warns(UserWarning, match=r"v\.tar: truncated shard"):
        if walk == "members":
            samples, _, truncated = list_shard(shard, LocalStore())
        else:
            walk = walk_samples(shard, LocalStore(), frozenset({"json"}))
            samples, truncated = walk.samples, walk.truncated
    assert truncated and len(samples) < 3


def test_a_video_shard_reads_a_json_label_larger_than_4k(tmp_path):
    label = json.dumps({"label": 2, "caption": "x" * 6000}).encode()
    shard = tmp_path / "v.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in (("k0.mp4", b"\x01" * 100), ("k0.json", label)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    samples, _, truncated = list_shard(str(shard), LocalStore())
    assert not truncated and [s.label for s in samples] == [2]


def test_coco_json_nested_past_the_recursion_limit_is_a_format_error():
    with pytest.raises(FormatError, match=r"inst\.json.*JSON.*RecursionError"):
        parse_coco("inst.json", b'{"images": ' + DEEP + b"}")


def test_video_and_detection_shard_sources_warn_of_a_cut(tmp_path):
    from dali_pipes.sources.detection_shards import DetectionShardSource
    from dali_pipes.sources.video_shards import VideoShardSource
    videos = _lying_shard(tmp_path / "v.tar", [n for i in range(3) for n in
                                               (f"k{i}.webm", f"k{i}.cls")], b"\x01" * 3000)
    with pytest.warns(UserWarning, match=r"v\.tar: truncated shard.*1 samples listed"):
        VideoShardSource(str(videos))
    images = _lying_shard(tmp_path / "d.tar", [n for i in range(3) for n in
                                               (f"k{i}.jpg", f"k{i}.json")], b"\x01" * 3000)
    with pytest.warns(UserWarning, match=r"d\.tar: truncated shard.*1 samples listed"):
        DetectionShardSource(str(images), categories=[{"id": 1, "name": "a"}])
