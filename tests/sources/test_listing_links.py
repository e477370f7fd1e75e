"""Symlinks inside a data folder: an entry reached through a link is followed when it
resolves outside the data folder's tree and to nothing listed before; one that leads back
into the tree (another class, the same class, the root, an ancestor) or to something
already listed is left out with its reason, and the listing warns once. No file is listed
twice or under another class, and no walk loops."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from dali_pipes.sample_data.tiny_data import write_image_folder
from dali_pipes.sources.folders import list_class_folders
from dali_pipes.sources.image import IMAGE_EXTENSIONS, ImageFolderSource
from dali_pipes.sources.links import INSIDE, REPEATED


@pytest.fixture
def root(tmp_path) -> Path:
    return write_image_folder(tmp_path / "data", n_images=6, n_classes=2)


def _listing(data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        listing = list_class_folders(data, IMAGE_EXTENSIONS, "image", recursive=True)
    return listing, [str(w.message) for w in caught if "symlink" in str(w.message)]


def _real_files(listing) -> list[str]:
    return [os.path.realpath(f) for f in listing.files]


def _by_class(listing) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f, label in zip(listing.files, listing.labels.tolist(), strict=True):
        out.setdefault(listing.classes[label], []).append(os.path.basename(f))
    return out


def _reasons(listing) -> dict[str, str]:
    return {os.path.basename(p): r for p, r in zip(listing.ignored, listing.ignored_reasons,
                                                   strict=True)}


@pytest.mark.parametrize("link", ["aa_link", "zz_link"])  # before and after its target
def test_a_class_folder_linked_to_another_class_is_left_out(root, link):
    plain, _ = _listing(root)
    os.symlink(root / "class_0", root / link)
    listing, warned = _listing(root)
    assert listing.classes == plain.classes and list(listing.files) == list(plain.files)
    assert _reasons(listing)[link] == INSIDE and len(warned) == 1


def test_a_file_linked_to_a_file_of_another_class_is_left_out(root):
    target = next((root / "class_0").iterdir())
    os.symlink(target, root / "class_1" / "copy.jpg")
    os.symlink(os.path.relpath(target, root / "class_0"), root / "class_0" / "again.jpg")
    listing, warned = _listing(root)
    assert len(set(_real_files(listing))) == len(listing.files) == 6
    assert "copy.jpg" not in _by_class(listing)["class_1"]
    assert {k: v for k, v in _reasons(listing).items() if v == INSIDE} == \
        {"copy.jpg": INSIDE, "again.jpg": INSIDE}
    assert warned == [f"{os.path.realpath(root)}: 2 symlink(s) left out: they lead back into "
                      f"the data folder or to entries already listed (see the listing's "
                      f"`ignored`)"]


def test_links_back_to_the_root_or_an_ancestor_never_loop(root):
    os.symlink(root, root / "class_0" / "to_root")
    os.symlink(root.parent, root / "class_1" / "to_parent")
    os.symlink("..", root / "class_1" / "up")
    os.symlink(root, root / "self")
    listing, _ = _listing(root)
    assert len(listing.files) == len(set(_real_files(listing))) == 6
    assert listing.classes == ("class_0", "class_1")
    reasons = _reasons(listing)
    assert all(reasons[n] == INSIDE for n in ("to_root", "to_parent", "up", "self"))


def test_links_outside_the_root_are_followed_once(root, tmp_path):
    outside = write_image_folder(tmp_path / "elsewhere", n_images=2, n_classes=1) / "class_0"
    os.symlink(outside, root / "class_2")
    os.symlink(outside, root / "class_3")  # the same folder again: left out
    shared = sorted(outside.iterdir())[0]
    os.symlink(shared, root / "class_0" / "shared.jpg")  # listed first: in class_0
    listing, warned = _listing(root)
    assert listing.classes == ("class_0", "class_1", "class_2")
    assert "shared.jpg" in _by_class(listing)["class_0"]
    assert _by_class(listing)["class_2"] == [sorted(outside.iterdir())[1].name]
    assert len(set(_real_files(listing))) == len(listing.files) == 8
    reasons = _reasons(listing)
    assert reasons["class_3"] == REPEATED and reasons[shared.name] == REPEATED
    assert len(warned) == 1


def test_the_image_source_on_a_linked_root(root, tmp_path):
    (root / "class_1" / "nested").mkdir()
    os.symlink(root / "class_0", root / "class_1" / "nested" / "sub")
    alias = tmp_path / "alias"
    os.symlink(root, alias)  # the root itself may be a link
    with pytest.warns(RuntimeWarning, match="1 symlink"):
        source = ImageFolderSource(alias)
    assert len(source) == 6
    assert {int(v) for v in source.labels} == {0, 1}


def test_a_scene_linked_to_another_is_listed_once(tmp_path):
    from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
    from dali_pipes.sources.hyperspectral import list_scene_files
    folder = small_scene_folder(tmp_path / "scenes")[0]["path"].parent
    scenes = list_scene_files(folder)
    first = Path(scenes[0][0])
    os.symlink(first.name, first.with_name("zz_" + first.name))
    with pytest.warns(RuntimeWarning, match="1 symlink"):
        assert list_scene_files(folder) == scenes
