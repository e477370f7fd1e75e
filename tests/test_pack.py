"""The pack tool: class folders into WebDataset shards that load to the same batches."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.pack import pack
from dali_pipes.sources.protocol import STORED
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.shard_writer import part_shards, plan_shards
from torch_bridge.testing.loader_contract import assert_same, copies

SHARD = 40_000  # bytes: the 37 test JPEGs (~6 kB each) make several shards


def _tree(folder: Path) -> dict[str, bytes]:
    """Shards, records, plan and manifest (indexes hold the shards' mtimes, lock files pids:
    not compared)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith(".index.npz")
            and not p.name.startswith(".")}


def test_plan_cuts_by_bytes_and_parts_split_by_stride():
    plan = plan_shards(np.array([5, 5, 5, 20, 1]), 10)
    assert [list(plan.samples(j)) for j in range(len(plan))] == [[0, 1], [2], [3], [4]]
    assert len(plan_shards(np.array([], np.int64), 10)) == 0
    assert part_shards(7, 1, 3) == [1, 4]
    with pytest.raises(ValueError, match="part 3/3"):
        part_shards(7, 3, 3)


def _out(image_folder, tmp_path, **kw) -> Path:
    pack(image_folder, tmp_path, shard_size=SHARD, progress=False, **kw)
    return tmp_path


def test_round_trip_gives_the_folders_batches(image_folder, tmp_path, backend):
    from torch_bridge import make_loader
    out = _out(image_folder, tmp_path / "out", workers=2)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["samples"] == 37 and manifest["classes"] == ["class_0", "class_1", "class_2"]
    assert len(manifest["shards"]) == manifest["shards_total"] > 2
    opts = {"backend": backend, "batch_size": 8, "size": 32, "seed": 11}
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    for epoch in (0, 1):
        folder, shards = (make_loader("image", d, **opts) for d in (image_folder, out))
        folder.set_epoch(epoch), shards.set_epoch(epoch)
        assert_same(copies(shards), copies(folder))
    assert shards.classes == folder.classes == manifest["classes"]  # from the manifest


def test_the_webdataset_package_reads_the_shards(image_folder, tmp_path):
    import webdataset as wds
    out = _out(image_folder, tmp_path)
    source = ShardSource(out)
    urls = sorted(str(p) for p in out.glob("*.tar"))
    got = [(s["__key__"], int(s["cls"])) for s in wds.WebDataset(urls, shardshuffle=False)]
    assert got == [(f"{i:09d}", int(source.labels[i])) for i in range(len(source))]


def test_output_is_deterministic_and_resumable(image_folder, tmp_path):
    one, two = _out(image_folder, tmp_path / "a"), _out(image_folder, tmp_path / "b", workers=2)
    assert _tree(one) == _tree(two)
    (one / "shard-000001.tar").unlink()
    (one / "shard-000002.tar.json").unlink()  # interrupted after the tar, before its record
    kept = (one / "shard-000000.tar").stat().st_mtime_ns
    _out(image_folder, one)
    assert (one / "shard-000000.tar").stat().st_mtime_ns == kept  # complete: skipped
    assert _tree(one) == _tree(two)


def test_parts_write_disjoint_shares_of_the_same_shards(image_folder, tmp_path):
    whole = _out(image_folder, tmp_path / "whole")
    parts = tmp_path / "parts"
    for i in range(3):
        _out(image_folder, parts, part=(i, 3))
    names = [json.loads((parts / f"manifest-part-{i}-of-3.json").read_text())["shards"]
             for i in range(3)]
    assert sorted(s["name"] for p in names for s in p) == sorted(
        p.name for p in whole.glob("*.tar"))
    shards = {p.name: p.read_bytes() for p in parts.glob("*.tar")}
    assert shards == {p.name: p.read_bytes() for p in whole.glob("*.tar")}


def test_command_line_resizes_and_keeps_labels(image_folder, tmp_path):
    from PIL import Image
    out = tmp_path / "small"
    run = subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(image_folder), str(out),
                          "--max-side", "64", "--quality", "80", "--shard-size", str(SHARD)],
                         capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert run.returncode == 0, run.stderr
    assert "packed shard-000000.tar" in run.stderr and "37 samples in 3 classes" in run.stdout
    source = ShardSource(out)
    sides = [max(Image.open(io.BytesIO(source.read(i).data.tobytes())).size)
             for i in range(len(source))]
    assert max(sides) == 64
    assert source.labels.tolist() == sorted(source.labels.tolist())  # listing order kept


def test_shuffle_mixes_classes_within_shards_deterministically(image_folder, tmp_path):
    from dali_pipes.sources.image import ImageFolderSource
    folder = ImageFolderSource(image_folder)
    plain = ShardSource(_out(image_folder, tmp_path / "plain"))
    mixed = ShardSource(_out(image_folder, tmp_path / "mixed", shuffle=3))
    keys = [int(mixed.member(i).split(".")[0]) for i in range(len(mixed))]
    assert sorted(keys) == list(range(len(folder))) and keys != sorted(keys)
    assert mixed.labels.tolist() == folder.labels[keys].tolist()
    for i in (0, len(keys) - 1):
        assert bytes(mixed.read(i, STORED).data) == Path(folder.files[keys[i]]).read_bytes()

    def classes_per_shard(source):
        return np.mean([len(set(source.labels[source.shard_ids == s].tolist()))
                        for s in np.unique(source.shard_ids)])
    assert classes_per_shard(mixed) > classes_per_shard(plain)
    again = _out(image_folder, tmp_path / "again", shuffle=3)
    assert _tree(again) == _tree(tmp_path / "mixed")
    assert json.loads((again / "manifest.json").read_text())["options"]["shuffle"] == 3
    with pytest.raises(ValueError, match="shuffle"):
        pack(image_folder, tmp_path / "bad", shuffle=-1)


def test_shard_classes_come_from_the_pack_manifest_when_it_is_the_pack_tools(image_folder,
                                                                             tmp_path):
    from dali_pipes.formats.errors import FormatError
    out = _out(image_folder, tmp_path / "out", part=(0, 1))
    assert ShardSource(out).classes == ("class_0", "class_1", "class_2")
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.rename(out / "manifest-part-0-of-1.json")  # a part's manifest serves too
    assert ShardSource(out).classes == ("class_0", "class_1", "class_2")
    (out / "manifest-part-0-of-1.json").unlink()
    manifest_path.write_text(json.dumps({"name": "someone else's manifest"}))
    assert ShardSource(out).classes == ("0", "1", "2")
    for bad, field in ((["a", "b"], "classes: names 2 classes"), ("abc", "classes: not a list")):
        manifest_path.write_text(json.dumps({**manifest, "classes": bad}))
        with pytest.raises(FormatError, match=f"manifest.json: {field}"):
            ShardSource(out)
    manifest_path.write_text("{not json")
    with pytest.raises(FormatError, match="manifest.json: manifest: not readable JSON"):
        ShardSource(out)
