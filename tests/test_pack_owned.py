"""The pack tool touches only its own files: recognised by the mark in their content, never
by name alone; a DST holding someone else's file of one of its names is refused (also with
--overwrite); its lock files go when it ends; COCO file names outside SRC are refused; its
command line names a mistyped option."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import dali_pipes.pack._shard as shard_job
from dali_pipes.pack import pack
from dali_pipes.sample_data.tiny_data import write_image_folder
from tests.test_pack_resume import _cli

SHARD = 40_000


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("pack_owned") / "src", n_images=8,
                              n_classes=2)


def _locks(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob(".*.lock"))


def test_every_json_file_the_tool_writes_carries_its_mark(src, tmp_path):
    from dali_pipes.pack._owned import MARK
    out = tmp_path / "out"
    pack(src, out, shard_size=SHARD, progress=False)
    written = sorted(out.glob("*.json"))
    assert {p.name for p in written} >= {"manifest.json", "pack-plan.json",
                                         "shard-000000.tar.json"}
    for path in written:
        assert MARK.items() <= json.loads(path.read_text()).items(), path.name


def test_a_users_manifest_in_dst_is_refused_not_replaced(src, tmp_path, capsys):
    """Before: the first run replaced it without a word."""
    out = tmp_path / "out"
    out.mkdir()
    mine = json.dumps({"experiment": "mine"})
    (out / "manifest.json").write_text(mine)
    for extra in ((), ("--overwrite",)):
        code, err = _cli(capsys, src, out, "--shard-size", SHARD, *extra)
        assert code == 1 and "holds manifest.json, which the pack tool did not write" in err
        assert (out / "manifest.json").read_text() == mine
        assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]  # locks gone too


def test_overwrite_keeps_a_users_categories_json(src, tmp_path, capsys):
    """Before: --overwrite deleted it, although only the tool's files were to go."""
    out = tmp_path / "out"
    pack(src, out, shard_size=SHARD, progress=False)
    (out / "categories.json").write_text('[{"id": 1, "name": "mine"}]')
    (out / "notes.txt").write_text("kept")
    code, err = _cli(capsys, src, out, "--shard-size", 20_000, "--overwrite")
    assert code == 1 and "holds categories.json, which the pack tool did not write" in err
    assert (out / "categories.json").read_text() == '[{"id": 1, "name": "mine"}]'
    (out / "categories.json").unlink()
    assert _cli(capsys, src, out, "--shard-size", 20_000, "--overwrite")[0] == 0
    assert (out / "notes.txt").read_text() == "kept"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["shard_size"] == 20_000
    assert len(list(out.glob("*.tar"))) == manifest["shards_total"]


def test_another_programs_shards_are_refused_even_with_overwrite(src, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "shard-000000.tar").write_bytes(b"\0" * 1024)
    (out / "shard-000000.tar.json").write_text(json.dumps({"samples": 1}))
    for extra in ((), ("--overwrite",)):
        code, err = _cli(capsys, src, out, *extra)
        assert code == 1 and "holds shard-000000.tar (and 1 more)" in err, err
    assert (out / "shard-000000.tar").read_bytes() == b"\0" * 1024


def test_lock_files_are_removed_when_the_tool_ends(src, tmp_path, capsys, monkeypatch):
    """Before: `.pack.lock` and `.pack-part-I-of-N.lock` stayed in the finished folder."""
    out = tmp_path / "out"
    assert _cli(capsys, src, out, "--shard-size", SHARD)[0] == 0
    assert _locks(out) == []
    for i in range(2):
        assert _cli(capsys, src, tmp_path / "parts", "--shard-size", SHARD, "--part",
                    f"{i}/2")[0] == 0
    assert _locks(tmp_path / "parts") == []
    code, _ = _cli(capsys, src, out, "--shard-size", 20_000)  # another plan: refused
    assert code == 1 and _locks(out) == []

    def failing(*args):
        raise OSError("the disk went away")
    monkeypatch.setattr(shard_job, "read_member", failing)
    code, err = _cli(capsys, src, tmp_path / "failed", "--shard-size", SHARD)
    assert code == 1 and "the disk went away" in err and _locks(tmp_path / "failed") == []


def test_coco_file_names_outside_src_are_refused(tmp_path, capsys):
    """Before: `../` and absolute file names were copied into the shards from outside SRC."""
    from dali_pipes.sample_data.sample_detection import tiny
    src = tiny(tmp_path / "det", 1)
    doc = json.loads((src / "instances.json").read_text())
    first = doc["images"][0]
    outside = tmp_path / "outside.jpg"
    shutil.copy(src / first["file_name"], outside)
    for name in ("../outside.jpg", str(outside)):
        first["file_name"] = name
        (src / "instances.json").write_text(json.dumps(doc))
        code, err = _cli(capsys, src, tmp_path / "o", "--modality", "detection")
        assert code == 2 and f"image {first['id']}.file_name: names a file outside SRC" in err
        assert repr(name) in err and not (tmp_path / "o" / "shard-000000.tar").exists()


@pytest.mark.parametrize("argv, said", [
    (["--workres", "2"], "unrecognized option --workres: did you mean --workers?"),
    (["--shard-sise=1000"], "unrecognized option --shard-sise: did you mean --shard-size?"),
    (["--bogus"], "unrecognized option --bogus: the options are --engine, --help, --max-side"),
    (["--part", "-1/2"], "argument --part: '-1/2': expected i/N with 0 <= i < N"),
])
def test_a_mistyped_option_is_named(src, tmp_path, capsys, argv, said):
    """Before: `--workres 2 SRC DST` took 2 as SRC ("required: dst" or unrecognized
    arguments), and `--part -1/2` was "expected one argument"."""
    for order in ([*argv, src, tmp_path / "o"], [src, *argv, tmp_path / "o"]):
        code, err = _cli(capsys, *order)
        assert code == 2 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
