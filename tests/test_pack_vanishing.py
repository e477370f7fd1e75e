"""A SRC file that disappears while the pack tool runs (a sync in progress, a cleanup job) is
a one-line error naming it and exit 1, not a traceback."""
from __future__ import annotations

import dali_pipes.pack as pack_tool
import dali_pipes.pack._shard as shard_job
from dali_pipes.sample_data.tiny_data import write_image_folder


def test_a_source_file_vanishing_mid_pack_is_named(tmp_path, monkeypatch, capsys):
    src = write_image_folder(tmp_path / "src", n_images=4, n_classes=2)
    victim = sorted(src.rglob("*.jpg"))[-1]
    read = shard_job.read_member

    def vanishing(store, blob):  # the file goes away after the listing, before its read
        if getattr(blob, "path", None) == str(victim) and victim.exists():
            victim.unlink()
        return read(store, blob)

    monkeypatch.setattr(shard_job, "read_member", vanishing)
    code = pack_tool.main([str(src), str(tmp_path / "dst"), "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "failed: FileNotFoundError" in err and victim.name in err and "resume" in err
