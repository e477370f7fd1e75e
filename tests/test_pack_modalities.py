"""The pack tool for every modality: video, fusion and frame-folder shards in the contract's
layout with class names kept, deterministic and resumable; hyperspectral refused clearly."""
from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from dali_pipes.pack import pack
from dali_pipes.pack._resume import PackRefused
from dali_pipes.sample_data import tiny_data
from dali_pipes.sources.video import VideoFolderSource


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    return tiny_data.video(tmp_path_factory.mktemp("v") / "videos", 0)


def _members(shards: Path) -> list[tuple[str, bytes]]:
    out = []
    for shard in sorted(shards.glob("*.tar")):
        with tarfile.open(shard) as tar:
            out += [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    return out


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def test_video_shards_hold_each_file_and_its_class(videos, tmp_path):
    source = VideoFolderSource(videos)
    manifest = pack(videos, tmp_path / "out", modality="video", shard_size=4096,
                    progress=False)
    assert manifest["classes"] == list(source.classes) and manifest["samples"] == len(source)
    members = _members(tmp_path / "out")
    assert [n for n, _ in members] == [f"{i:09d}.{e}" for i in range(len(source))
                                       for e in ("webm", "cls")]
    for i, path in enumerate(source.files):
        assert members[2 * i][1] == Path(path).read_bytes()
        assert int(members[2 * i + 1][1]) == source.labels[i]


def test_video_packing_is_deterministic_and_resumes(videos, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    pack(videos, first, modality="video", shard_size=4096, progress=False)
    pack(videos, second, modality="video", shard_size=4096, progress=False)
    assert _tree(first) == _tree(second)
    (second / "shard-000001.tar").unlink()  # a packer stopped before this shard
    (second / "shard-000002.tar").write_bytes(b"damaged")
    kept = (second / "shard-000000.tar").stat().st_mtime_ns
    pack(videos, second, modality="video", shard_size=4096, progress=False)
    assert _tree(first) == _tree(second)
    assert (second / "shard-000000.tar").stat().st_mtime_ns == kept  # finished: kept
    assert json.loads((second / "pack-plan.json").read_text())["plan"]["modality"] == "video"
    with pytest.raises(PackRefused, match="shuffle was None, now 3"):  # another plan
        pack(videos, second, modality="video", shard_size=4096, shuffle=3, progress=False)


def test_fusion_shards_add_the_imu_table(tmp_path):
    src = tiny_data.fusion(tmp_path / "fusion", 1)
    pack(src, tmp_path / "out", modality="fusion", progress=False)
    names = [n for n, _ in _members(tmp_path / "out")]
    assert names[:3] == ["000000000.webm", "000000000.imu.csv", "000000000.cls"]
    assert len(names) == 3 * 3


def test_frame_folders_pack_every_frame_and_their_timestamps(tmp_path):
    src = tiny_data.frames(tmp_path / "frames", 1)
    manifest = pack(src, tmp_path / "out", modality="frames", progress=False)
    names = [n for n, _ in _members(tmp_path / "out")]
    first = [n for n in names if n.startswith("000000000.")]
    assert "000000000.timestamps.npy" in first and first[-1] == "000000000.cls"
    assert sum(n.endswith(".jpg") for n in first) == 24  # the first clip's frames
    assert manifest["classes"] == ["class_0", "class_1"]


def test_hyperspectral_is_refused_saying_cubes_stay_files(tmp_path):
    src = tiny_data.hyperspectral(tmp_path / "scenes", 0)
    run = subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(src), str(tmp_path / "o"),
                          "--modality", "hyperspectral"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "hyperspectral scenes are not packed into shards: ENVI and SPE cubes stay files" \
        in run.stderr


def test_max_side_is_refused_for_other_modalities(videos, tmp_path):
    with pytest.raises(ValueError, match="--max-side re-encodes images; it does not apply to "
                       "--modality video"):
        pack(videos, tmp_path / "o", modality="video", max_side=64, progress=False)


def test_detection_command_line_writes_categories_beside_the_shards(tmp_path):
    from dali_pipes.sample_data.sample_detection import CATEGORIES, tiny
    src = tiny(tmp_path / "det", 1)
    run = subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(src), str(tmp_path / "o"),
                          "--modality", "detection"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    written = json.loads((tmp_path / "o" / "categories.json").read_text())
    assert written == {"categories": list(CATEGORIES), "written_by": "dali_pipes.pack"}
    from dali_pipes.sources.detection_shards import DetectionShardSource
    assert DetectionShardSource(tmp_path / "o").classes == tuple(c["name"] for c in CATEGORIES)
    names = [n for n, _ in _members(tmp_path / "o")]
    assert names[:2] == ["000000000.jpg", "000000000.json"] and len(names) == 2 * 6
