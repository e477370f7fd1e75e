"""compare.py --peers: the other loaders' rows and the decode-only ceiling (bench/peers.py).
PyAV (a dependency) and the ceiling always run; a peer that is not installed is skipped
with one line; `repeated_folder` makes the long epochs the peer runs use, and stock DALI
runs its own recipe. The end-to-end run with peers is in test_compare.py."""
from pathlib import Path

import pytest
import torch

from bench.compare import peer_rows
from bench.peers import PEERS, unavailable
from tests.conftest import write_image_folder


def test_every_peer_is_a_row_or_one_skipped_line():
    lines: list[str] = []
    rows = peer_rows("image", "all", lines.append)
    assert {"pyav", "decode-ceiling"} <= set(rows)
    assert sorted(rows + [line.split()[1] for line in lines]) == sorted(PEERS)
    assert all(line.startswith("skipped: ") and "\n" not in line for line in lines)
    assert unavailable("nosuch").startswith("unknown peer")
    with pytest.raises(SystemExit, match="unknown nosuch"):
        peer_rows("image", "pyav,nosuch", lines.append)
    with pytest.raises(SystemExit, match="only for --modality image or video"):
        peer_rows("hyperspectral", "all", lines.append)


def _folder(root, files: dict[str, bytes]):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_repeated_folder_links_each_file_copies_times(tmp_path):
    """Every row's epoch walks the same bytes `copies` times (hard links, one copy on disk)."""
    from bench.peers import repeated_folder
    root = _folder(tmp_path / "set", {"a/x.jpg": b"1", "a/y.jpg": b"22", "b/z.jpg": b"333"})
    (root / ".complete").touch()  # a file beside the class folders is not a sample
    out = repeated_folder(root, 3, into=tmp_path / "cache")
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*.jpg"))
    assert names == [f"{c}/{s}-{k}.jpg" for c, s in (("a", "x"), ("a", "y"), ("b", "z"))
                     for k in range(3)]
    for link in out.rglob("*.jpg"):
        original = root / link.parent.name / f"{link.stem.rsplit('-', 1)[0]}.jpg"
        assert link.stat().st_ino == original.stat().st_ino
    assert repeated_folder(root, 3, into=tmp_path / "cache") == out  # made once
    (root / "b" / "w.jpg").write_bytes(b"4")
    changed = repeated_folder(root, 3, into=tmp_path / "cache")
    assert changed != out and len(list(changed.rglob("*.jpg"))) == 12


def test_a_repeated_folder_refuses_bad_requests(tmp_path):
    from bench.peers import repeated_folder
    root = _folder(tmp_path / "set", {"a/x.jpg": b"1"})
    for copies in (0, 2.0, True):
        with pytest.raises(ValueError, match="copies must be an int >= 1"):
            repeated_folder(root, copies, into=tmp_path)
    flat = _folder(tmp_path / "flat", {"x.jpg": b"1"})
    with pytest.raises(ValueError, match=f"{flat}: no class folders"):
        repeated_folder(flat, 2, into=tmp_path)
    with pytest.raises(ValueError, match="missing: no class folders"):
        repeated_folder(tmp_path / "missing", 2, into=tmp_path)


def test_the_repeat_command_prints_the_folder(tmp_path, monkeypatch, capsys):
    from bench.peers import main
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path / "cache"))
    root = _folder(tmp_path / "set", {"a/x.jpg": b"1", "b/y.jpg": b"2"})
    assert main(["--data", str(root), "--copies", "2"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out.parent == tmp_path / "cache" and len(list(out.rglob("*.jpg"))) == 4


def test_stock_dali_decodes_the_crop_window_as_its_recipe_does(tmp_path):
    """DALI's ResNet-50 recipe: decoders.image_random_crop + resize, not a whole-file decode
    and a crop after it; the batch is ours (normalized float32 NCHW)."""
    from bench.baselines import dali_stock_loader
    data = write_image_folder(tmp_path / "d", n_images=8, n_classes=2)
    loader = dali_stock_loader(data, batch_size=4, size=32)
    graph = loader.inner._pipes[0].serialize()
    assert b"decoders__ImageRandomCrop" in graph and b"decoders__Image\x12" not in graph
    batch = next(iter(loader))
    assert batch["image"].shape == (4, 3, 32, 32) and batch["image"].dtype == torch.float32
