"""`python -m torch_bridge.check` (issue 15 item 16): good data exits 0, bad data exits 1
naming every file the loaders would skip and why."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import write_image_folder
from tests.formats.jpeg_corruptions import bomb, cut_with_eoi, encode, eoi_inside
from torch_bridge.tools.check import check_data, detect_modality, main


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch_bridge.tools.check", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return write_image_folder(tmp_path_factory.mktemp("good"), n_images=5, n_classes=2)


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = write_image_folder(tmp_path_factory.mktemp("bad"), n_images=4, n_classes=2)
    (root / "class_0" / "bomb.jpg").write_bytes(bomb(30000, 30000))
    (root / "class_0" / "eoi.jpg").write_bytes(eoi_inside(encode()))
    (root / "class_1" / "empty.jpg").write_bytes(b"")
    (root / "class_1" / "gone.jpg").symlink_to(root / "nowhere.jpg")
    (root / "class_1" / "notes.txt").write_text("not a sample")
    return root


def test_cli_good_folder_exits_0(good):
    done = _run(good)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "image: checked 5 files, 0 bad" in done.stdout
    assert "checked 5/5" in done.stderr  # plain progress lines when not on a terminal


def test_cli_bad_folder_exits_1_naming_each_file(bad):
    done = _run(bad, "--modality", "image")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("SKIP ")]
    named = {ln.split(":")[0].rsplit("/", 1)[-1] for ln in lines}
    assert named == {"bomb.jpg", "eoi.jpg", "empty.jpg", "gone.jpg"}
    text = done.stdout
    assert "30000x30000" in text and "EOI marker" in text and "dangling symlink" in text
    assert "checked 7 files, 4 bad, 1 other entries ignored" in text


def test_decode_finds_what_the_scan_check_cannot(tmp_path, capsys):
    root = write_image_folder(tmp_path, n_images=2, n_classes=1)
    (root / "class_0" / "cut.jpg").write_bytes(cut_with_eoi(encode()))
    assert check_data(root).ok
    report = check_data(root, decode=True)
    assert [os.path.basename(p.path) for p in report.problems] == ["cut.jpg"]
    assert "decoder" in report.problems[0].reason
    assert main([str(root), "--max-pixels", "10"]) == 1
    assert "pixel count" in capsys.readouterr().out


def test_other_modalities(tiny_data, tmp_path, capsys):
    for kind in ("hyperspectral", "fusion", "frames", "video"):
        assert detect_modality(tiny_data(kind).one) == tiny_data(kind).modality
        report = check_data(tiny_data(kind).one)
        assert report.ok and report.checked > 0, (kind, report)
    hyper = shutil.copytree(tiny_data("hyperspectral").one, tmp_path / "hyper")
    np.save(hyper / "b.labels.npy", np.ones((2, 2), np.int32))
    assert main([str(hyper)]) == 1
    assert "make_loader would fail" in capsys.readouterr().out
    fusion = shutil.copytree(tiny_data("fusion").one, tmp_path / "fusion")
    imu = sorted(fusion.glob("*/*.imu.csv"))[0]
    imu.write_text(imu.read_text().splitlines()[0] + "\n1.0,oops\n")
    report = check_data(fusion)
    assert [p.path for p in report.problems] == [str(imu.with_name(
        imu.name.replace(".imu.csv", ".webm")))]
    frames = shutil.copytree(tiny_data("frames").one, tmp_path / "frames")
    victim = sorted(frames.glob("*/*/frame_000001.jpg"))[0]
    victim.write_bytes(victim.read_bytes()[:-2])
    report = check_data(frames)
    assert len(report.problems) == 1 and "EOI marker" in report.problems[0].reason


def test_detection(tiny_data, tmp_path):
    data = shutil.copytree(tiny_data("detection").one, tmp_path / "det")
    assert detect_modality(data) == "detection"
    report = check_data(data, decode=True)
    assert report.ok and report.checked == len(list(data.glob("*.jpg"))) > 0, report
    victim = sorted(data.glob("*.jpg"))[0]
    victim.write_bytes(victim.read_bytes()[:40])
    report = check_data(data)
    assert [p.path for p in report.problems] == [str(victim)]
    (data / "instances.json").write_text("{not json")
    assert main([str(data), "--modality", "detection"]) == 1


def test_decode_reads_jpegs_strictly_and_leaves_other_formats_to_the_header_check(tmp_path):
    from PIL import Image
    root = write_image_folder(tmp_path, n_images=1, n_classes=1)
    pixels = np.zeros((12, 16, 3), np.uint8)
    for name in ("a.png", "b.jp2", "c.webp"):
        Image.fromarray(pixels).save(root / "class_0" / name)
    (root / "class_0" / "cut.jpg").write_bytes(cut_with_eoi(encode()))
    report = check_data(root, decode=True)
    assert [os.path.basename(p.path) for p in report.problems] == ["cut.jpg"]


@pytest.mark.parametrize("kind", ["image", "frames", "video", "fusion", "detection"])
def test_shards_as_make_loader_takes_them(kind, tiny_data, tmp_path, capsys):
    """The pack tool's output folder, its first shard and a brace pattern are checked as
    make_loader reads them, the modality read from the manifest; without the manifest
    (bare WebDataset shards) from the members."""
    from dali_pipes.pack import pack
    data = tiny_data(kind)
    out = tmp_path / "packed"
    pack(data.one, out, modality=kind, progress=False)
    files = check_data(data.one).checked
    for target in (out, out / "shard-000000.tar", f"{out}/shard-{{000000..000000}}.tar"):
        assert main([str(target)]) == 0, capsys.readouterr().out
        assert f"{data.modality}: checked {files} files, 0 bad" in capsys.readouterr().out
    (out / "manifest.json").unlink()
    assert detect_modality(out) == data.modality
    assert check_data(out, modality=data.modality).ok


def test_a_store_handed_in_is_checked_through(bad):
    from tests.stores.user_stores import MountedStore
    report = check_data(f"mnt/{bad.name}", modality="image", store=MountedStore(bad.parent))
    named = {p.path.rsplit("/", 1)[-1] for p in report.problems}
    assert {"bomb.jpg", "eoi.jpg", "empty.jpg"} <= named
    assert all(p.path.startswith("mnt/") for p in report.problems)
    with pytest.raises(ValueError, match="give the modality with store="):
        check_data(f"mnt/{bad.name}", store=MountedStore(bad.parent))
