"""The class-folder walk's shortcut (dali_pipes.sources.folder_walk): plain names (visible
regular files with a lower- or upper-case sample suffix) are taken on name and type, every
other entry goes through the full predicate, and the listing is the same whatever the
number of entries read at a time and in torchvision's ImageFolder order."""
from __future__ import annotations

import os
import warnings

import pytest

from dali_pipes.sources import folder_walk, list_class_folders
from dali_pipes.sources.folder_walk import _all_plain, plain_suffixes, read_folder
from dali_pipes.sources.image import IMAGE_EXTENSIONS


def _write(folder, names) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"x")


def test_plain_suffixes_are_the_extensions_in_lower_and_upper_case():
    suffixes = plain_suffixes(IMAGE_EXTENSIONS)
    assert suffixes is not None
    assert {".jpg", ".JPG", ".png", ".PNG"} <= set(suffixes) and ".Jpg" not in suffixes
    assert len(suffixes) == 2 * len(IMAGE_EXTENSIONS)
    for odd in (None, frozenset(), frozenset({".tar.gz"}), frozenset({".JPG"}),
                frozenset({"jpg"})):
        assert plain_suffixes(odd) is None


def test_names_sharing_a_suffix_or_not():
    suffixes = plain_suffixes(IMAGE_EXTENSIONS)
    assert _all_plain(["a.jpg", "b.jpg", "c.JPG", "d.png"], suffixes)
    assert not _all_plain(["a.jpg", "b.jpgx"], suffixes)
    assert not _all_plain(["a.jpg", "b.jpg.bak"], suffixes)
    assert not _all_plain(["a.jpg", ".b.jpg"], suffixes)
    assert not _all_plain([".a.jpg", "b.jpg"], suffixes)
    assert not _all_plain(["a.Jpg"], suffixes)  # mixed case: the full predicate decides
    assert not _all_plain(["jpg", "b.jpg"], suffixes)


@pytest.mark.parametrize("chunk", [1, 2, 3, 4096])
def test_read_folder_takes_plain_names_and_leaves_the_rest(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(folder_walk, "_CHUNK", chunk)
    plain = ["a.jpg", "B.JPG", "c.png", "d.jpeg"]
    _write(tmp_path, plain + ["Mixed.Jpg", ".hidden.jpg", "notes.txt", "x.jpg.bak"])
    (tmp_path / "sub.jpg").mkdir()
    os.symlink(tmp_path / "a.jpg", tmp_path / "link.jpg")
    names, others = read_folder(str(tmp_path), plain_suffixes(IMAGE_EXTENSIONS))
    assert sorted(names) == sorted(plain)
    assert sorted(e.name for e in others) == sorted(
        ["Mixed.Jpg", ".hidden.jpg", "notes.txt", "x.jpg.bak", "sub.jpg", "link.jpg"])
    names, others = read_folder(str(tmp_path), None)  # every entry checked in full
    assert names == [] and len(others) == 10


def _hostile_tree(root):
    for c in range(3):
        _write(root / f"class_{c}", [f"img_{i:02d}.jpg" for i in range(7)])
    _write(root / "class_0", ["UP.JPG", "Mixed.Jpg", ".hidden.jpg", "notes.txt"])
    _write(root / "class_1" / "sub", ["s1.jpg", "s0.png"])
    _write(root / "class_1" / "sub" / "deeper", ["d.jpg"])
    _write(root / "class_1" / "a_sub", ["a.jpg"])
    os.symlink(root / "class_0" / "img_00.jpg", root / "class_2" / "again.jpg")
    os.symlink(root / "nowhere.jpg", root / "class_2" / "gone.jpg")


def _listing(root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the links left out
        listing = list_class_folders(root, IMAGE_EXTENSIONS, "image", recursive=True)
    return (list(listing.files), listing.labels.tolist(), listing.ignored,
            listing.ignored_reasons)


def test_the_listing_is_the_same_whatever_the_chunk(tmp_path, monkeypatch):
    _hostile_tree(tmp_path)
    whole = _listing(tmp_path)
    assert len(whole[0]) == 7 * 3 + 2 + 4 and len(whole[2]) == 4
    for chunk in (1, 2, 5):
        monkeypatch.setattr(folder_walk, "_CHUNK", chunk)
        assert _listing(tmp_path) == whole


def test_the_order_is_imagefolders(tmp_path):
    torchvision = pytest.importorskip("torchvision")
    for c in range(2):
        _write(tmp_path / f"class_{c}", [f"img_{i:02d}.jpg" for i in (3, 1, 2)])
    _write(tmp_path / "class_0", ["UP.JPG", "Mixed.Jpg", "b.png"])
    _write(tmp_path / "class_1" / "sub", ["s1.jpg", "s0.png"])
    _write(tmp_path / "class_1" / "sub" / "deeper", ["d.jpg"])
    _write(tmp_path / "class_1" / "a_sub", ["a.jpg"])
    _write(tmp_path / "class_1" / "sub-2", ["z.jpg"])  # "-" sorts before "/"
    theirs = torchvision.datasets.ImageFolder(str(tmp_path)).samples
    files, labels, ignored, _ = _listing(tmp_path)
    assert list(zip(files, labels, strict=True)) == theirs and ignored == ()
