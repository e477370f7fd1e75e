"""The pack tool's resume, locks and arguments: a rerun finishes only what the same plan
started, a second packer is turned away, every argument is range-checked."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dali_pipes.pack import main, pack
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.shard_writer import HOST

SHARD = 40_000
ROOT = Path(__file__).parents[1]


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith(".index.npz") and not p.name.startswith(".")}


def _src(image_folder: Path, tmp_path: Path) -> Path:
    """A copy of the test images this test may change (modification times kept)."""
    return Path(shutil.copytree(image_folder, tmp_path / "src"))


def _cli(capsys, *argv) -> tuple[int, str]:
    """main(argv)'s exit status and stderr (argparse's errors exit through SystemExit)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_rerun_with_another_plan_is_refused_naming_what_differs(image_folder, tmp_path, capsys):
    src, out = _src(image_folder, tmp_path), tmp_path / "out"
    assert _cli(capsys, src, out, "--shard-size", SHARD)[0] == 0
    before = _tree(out)
    refusals = {("--shard-size", 20_000): "shard_size was 40000, now 20000",
                ("--shard-size", SHARD, "--max-side", 64): "max_side was None, now 64",
                ("--shard-size", SHARD, "--shuffle", 1): "shuffle was None, now 1"}
    for options, said in refusals.items():
        code, err = _cli(capsys, src, out, *options)
        assert code == 1 and said in err and "--overwrite" in err, err
    # options that do not change the bytes resume: the quality without --max-side, workers
    assert _cli(capsys, src, out, "--shard-size", SHARD, "--quality", 50, "--workers", 2)[0] == 0
    assert _tree(out).keys() == before.keys()
    assert {k: v for k, v in _tree(out).items() if k != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"}  # shards kept, not rewritten
    before = _tree(out)
    for change in ("add", "remove", "rewrite"):
        victim = src / "class_1" / "img_0001.jpg"
        if change == "add":
            shutil.copy(victim, src / "class_1" / "extra.jpg")
        elif change == "remove":
            (src / "class_1" / "extra.jpg").unlink()
            victim.unlink()
        else:
            shutil.copy(src / "class_0" / "img_0000.jpg", victim)  # back, other bytes
        code, err = _cli(capsys, src, out, "--shard-size", SHARD)
        assert code == 1 and "SRC's files were added, removed" in err, (change, err)
        assert _tree(out) == before
    assert _cli(capsys, src, out, "--shard-size", 20_000, "--overwrite")[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(list(out.glob("*.tar"))) == manifest["shards_total"] == len(manifest["shards"])
    assert len(ShardSource(out)) == manifest["samples"] == 37


def test_damaged_shards_are_written_again_and_foreign_ones_refused(image_folder, tmp_path,
                                                                  capsys):
    fresh = tmp_path / "fresh"
    pack(image_folder, fresh, shard_size=SHARD, progress=False)
    out = Path(shutil.copytree(fresh, tmp_path / "out"))
    shard = bytearray((out / "shard-000001.tar").read_bytes())
    shard[600] ^= 0xFF  # same size, other bytes
    (out / "shard-000001.tar").write_bytes(bytes(shard))
    with open(out / "shard-000002.tar", "ab") as f:
        f.write(b"\0" * 512)
    capsys.readouterr()
    pack(image_folder, out, shard_size=SHARD, progress=False)
    err = capsys.readouterr().err
    assert "shard-000001.tar: damaged: sha256 differs" in err
    assert "shard-000002.tar: damaged:" in err and "its record says" in err
    assert _tree(out) == _tree(fresh)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (out / f"shard-000004.tar.{HOST}_{dead}.tmp").write_bytes(b"partial")  # killed writer's
    (out / f"shard-000004.tar.{HOST}_{os.getpid()}.tmp").write_bytes(b"x")  # a live one's
    (out / "notes.txt.1.tmp").write_text("not the pack tool's")
    pack(image_folder, out, shard_size=SHARD, progress=False)
    assert sorted(p.name for p in out.glob("*.tmp")) == sorted(
        [f"shard-000004.tar.{HOST}_{os.getpid()}.tmp", "notes.txt.1.tmp"])
    record = json.loads((out / "shard-000003.tar.json").read_text())
    (out / "shard-000003.tar.json").write_text(json.dumps({**record, "plan": "0" * 64}))
    code, err = _cli(capsys, image_folder, out, "--shard-size", SHARD)
    assert code == 1 and "shard-000003.tar.json: written by another plan" in err
    (out / "pack-plan.json").unlink()  # as an older pack tool left it
    code, err = _cli(capsys, image_folder, out, "--shard-size", SHARD)
    assert code == 1 and "no pack-plan.json" in err


def _slow_src(image_folder: Path, tmp_path: Path) -> Path:
    """The test images and, listed last, one large image that takes a second to resize."""
    from PIL import Image
    src = _src(image_folder, tmp_path)
    big = Image.radial_gradient("L").resize((3000, 3000)).convert("RGB")
    big.save(src / "class_2" / "zz_large.jpg", quality=90)
    return src


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until `path` exists; fails when the packer exits first or after 5 minutes."""
    deadline = time.monotonic() + 300
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


def test_killed_packer_resumes_and_a_second_packer_is_turned_away(image_folder, tmp_path,
                                                                  capsys):
    src, out = _slow_src(image_folder, tmp_path), tmp_path / "out"
    argv = [src, out, "--shard-size", 7_000, "--max-side", 64]
    proc = subprocess.Popen([sys.executable, "-m", "dali_pipes.pack", *map(str, argv)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _wait_for(out / "shard-000000.tar.json", proc)
        proc.send_signal(signal.SIGSTOP)  # mid-pack, holding its locks, until killed below
        code, err = _cli(capsys, *argv)
        assert code == 1 and f"pid {proc.pid} " in err and "part 0/1" in err, err
        code, err = _cli(capsys, *argv, "--overwrite")
        assert code == 1 and f"pid {proc.pid} " in err, err
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (out / "manifest.json").exists()  # killed mid-pack
    assert _cli(capsys, *argv)[0] == 0  # the dead packer's lock does not block
    assert not list(out.glob("*.tmp"))  # its temporary file is gone
    fresh = tmp_path / "fresh"
    assert _cli(capsys, src, fresh, *argv[2:])[0] == 0
    assert _tree(out) == _tree(fresh)
    assert len(ShardSource(out)) == 38


@pytest.mark.parametrize("argv, said", [
    (["--shard-size", "0"], "argument --shard-size"),
    (["--shard-size", "-5"], "argument --shard-size"),
    (["--shard-size", "1e9"], "argument --shard-size"),
    (["--shard-size", str(1 << 50)], "argument --shard-size"),
    (["--max-side", "0"], "argument --max-side"),
    (["--quality", "0"], "argument --quality"),
    (["--quality", "101"], "argument --quality"),
    (["--part", "3/3"], "argument --part"),
    (["--part", "-1/2"], "argument --part: '-1/2': expected i/N"),
    (["--part", "1"], "argument --part"),
    (["--workers", "0"], "argument --workers"),
    (["--shuffle", "-1"], "argument --shuffle"),
])
def test_out_of_range_options_are_refused_naming_the_option(image_folder, tmp_path, capsys,
                                                            argv, said):
    out = tmp_path / "out"
    code, err = _cli(capsys, image_folder, out, *argv)
    assert code == 2 and said in err, err
    assert not out.exists()


def test_bad_src_or_dst_is_refused_naming_it(image_folder, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    cases = [(tmp_path / "missing", tmp_path / "o", "SRC"), (tmp_path / "file", tmp_path / "o",
             "SRC"), (tmp_path / "empty", tmp_path / "o", "SRC"),
             (image_folder, tmp_path / "file", "DST"), (image_folder, image_folder / "out", "DST")]
    for src, dst, said in cases:
        code, err = _cli(capsys, src, dst)
        assert code == 2 and f"error: {said} {src if said == 'SRC' else dst}" in err, err
    assert not (image_folder / "out").exists() and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="quality"):
        pack(image_folder, tmp_path / "o", quality=0)


def test_help_shows_every_options_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out.split("options:", 1)[1]
    entries = [e for e in ("\n" + text).split("\n  -")[1:] if not e.startswith("h, --help")]
    assert len(entries) == 11
    for entry in entries:
        assert "(default:" in entry, entry



def test_a_killed_worker_process_gets_its_shards_written_again(image_folder, tmp_path, capsys):
    """Before: multiprocessing's Pool waited forever for the shard of a worker killed mid-
    shard (and said nothing when it replaced an idle one)."""
    import threading

    import psutil
    src, out = _slow_src(image_folder, tmp_path), tmp_path / "out"
    options = {"shard_size": 7_000, "max_side": 64, "progress": False}
    thread = threading.Thread(target=pack, args=(src, out), kwargs={**options, "workers": 2},
                              daemon=True)
    thread.start()
    victim = None
    while victim is None and thread.is_alive():
        victim = next((p for p in psutil.Process().children()
                       if "spawn_main" in " ".join(p.cmdline())), None)
    assert victim is not None
    victim.kill()
    thread.join(300)
    assert not thread.is_alive(), "the pack waited for the dead worker's shard"
    assert "a worker process died; writing shard-" in capsys.readouterr().err
    pack(src, tmp_path / "fresh", **options)
    assert _tree(out) == _tree(tmp_path / "fresh")


def test_a_worker_spawned_as_the_pool_breaks_does_not_hold_the_pack(image_folder, tmp_path,
                                                                    monkeypatch, capsys):
    """CPython's ProcessPoolExecutor spawns its processes in `submit`: one spawned while
    the manager ends a broken pool's processes is never told to end (the shutdown's join
    waited for it forever), or, a moment later, fails on the closed queue (the pack died
    with "OSError: handle is closed"). The second here: the second spawn kills the first
    process and starts its own once the pool is marked broken; either way the shards are
    written again by a new pool."""
    import concurrent.futures.process as pool_module
    import threading
    real = pool_module.ProcessPoolExecutor._spawn_process
    killed: list = []

    def spawn(self):
        if self._processes and not killed:
            first = next(iter(self._processes.values()))
            first.kill()
            killed.append(first)
            deadline = time.monotonic() + 60
            while not self._broken and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)  # the manager has ended the processes it knew of
        return real(self)

    monkeypatch.setattr(pool_module.ProcessPoolExecutor, "_spawn_process", spawn)
    src, out = _src(image_folder, tmp_path), tmp_path / "out"
    options = {"shard_size": 7_000, "max_side": 64, "progress": False}
    thread = threading.Thread(target=pack, args=(src, out), kwargs={**options, "workers": 2},
                              daemon=True)
    thread.start()
    thread.join(120)
    assert killed and not thread.is_alive(), "the pack waited for a worker never ended"
    assert "a worker process died; writing shard-" in capsys.readouterr().err
    pack(src, tmp_path / "fresh", **options)
    assert _tree(out) == _tree(tmp_path / "fresh")
