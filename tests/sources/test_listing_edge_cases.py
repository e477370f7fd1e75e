"""Listing edge cases (issue 15 items 6, 8, 12; issue 11 item 4): symlinks that point nowhere
or loop, unreadable class folders, names that are not UTF-8, the listing digest."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from dali_pipes.sources import ImageFolderSource, list_class_folders
from dali_pipes.sources.folders import is_sample
from dali_pipes.sources.image import IMAGE_EXTENSIONS
from dali_pipes.sources.video_frames import FrameFolderSource, is_frame_folder_tree
from tests.conftest import write_image_folder


@pytest.fixture
def root(tmp_path):
    return write_image_folder(tmp_path / "data", n_images=4, n_classes=2)


def _reasons(listing) -> dict[str, str]:
    return dict(zip(listing.ignored, listing.ignored_reasons, strict=True))


def test_is_sample_is_the_one_predicate(root):
    (root / "class_0" / ".hidden.jpg").write_bytes(b"x")
    (root / "class_0" / "notes.txt").write_text("x")
    (root / "class_0" / "UPPER.JPG").write_bytes(b"x")
    (root / "class_0" / "sub").mkdir()
    got = {e.name: is_sample(e, IMAGE_EXTENSIONS) for e in os.scandir(root / "class_0")}
    assert got["UPPER.JPG"] is None and got["img_0000.jpg"] is None
    assert got[".hidden.jpg"] == "hidden" and got["notes.txt"] == "other extension"
    assert got["sub"] == "not a file"
    folders = {e.name: is_sample(e, None) for e in os.scandir(root / "class_0")}
    assert folders["sub"] is None and folders["img_0000.jpg"] == "not a folder"


def test_dangling_symlinks_and_loops_are_reported_not_dropped(root):
    (root / "class_0" / "gone.jpg").symlink_to(root / "nowhere.jpg")
    loop = root / "class_1" / "loop.jpg"
    loop.symlink_to(loop)
    (root / "class_loop").symlink_to(root / "class_loop")
    src = ImageFolderSource(root)
    assert len(src) == 4 and src.classes == ("class_0", "class_1")
    reasons = _reasons(src.listing)
    assert reasons[str(root / "class_0" / "gone.jpg")] == "dangling symlink"
    assert reasons[str(loop)] == "symlink loop or unreadable"
    assert reasons[str(root / "class_loop")] == "symlink loop or unreadable"


def test_an_unreadable_class_folder_is_reported_not_fatal(root, monkeypatch):
    blocked = os.path.join(root, "class_1")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == blocked:
            raise PermissionError(13, "Permission denied", blocked)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # a chmod 000 does not stop root
    with pytest.warns(RuntimeWarning, match="class_1: class folder cannot be read"):
        listing = list_class_folders(root, IMAGE_EXTENSIONS, "image")
    assert listing.classes == ("class_0", "class_1")  # class ids stay those of the tree
    assert len(listing.files) == 2 and set(listing.labels.tolist()) == {0}
    assert _reasons(listing)[blocked].startswith("unreadable class folder")


def test_names_that_are_not_utf8_are_listed_and_digested(root):
    base = os.fsencode(root)
    os.rename(base + b"/class_0/img_0000.jpg", base + b"/class_0/caf\xe9.jpg")
    os.rename(base + b"/class_1", base + b"/cl\xe9ss")
    src = ImageFolderSource(root)
    assert [os.fsencode(f).rsplit(b"/", 2)[-2:] for f in src.files][0] == \
        [b"class_0", b"caf\xe9.jpg"]
    assert os.fsencode(src.classes[1]) == b"cl\xe9ss"
    assert src.listing_digest().startswith("4 files, sha256 ")
    data, _ = src.read(0)
    assert data.size > 0


def test_digest_sees_sizes_and_times_and_survives_a_move(root, tmp_path):
    before = ImageFolderSource(root).listing_digest()
    moved = shutil.copytree(root, tmp_path / "moved")  # copy2 keeps the times
    assert ImageFolderSource(moved).listing_digest() == before
    victim = moved / "class_0" / "img_0000.jpg"
    st = victim.stat()
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    touched = ImageFolderSource(moved).listing_digest()
    assert touched != before and touched.split(" (names)")[0] == before.split(" (names)")[0]
    victim.write_bytes(victim.read_bytes() + b"\0")
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ImageFolderSource(moved).listing_digest() != before


def test_listing_carries_sizes_and_times(root):
    listing = list_class_folders(root, IMAGE_EXTENSIONS, "image")
    sizes = np.array([os.stat(f).st_size for f in listing.files])
    times = np.array([os.stat(f).st_mtime_ns for f in listing.files])
    assert (listing.sizes == sizes).all() and (listing.mtimes_ns == times).all()


def test_frame_folders_share_the_predicate(tmp_path):
    root = tmp_path / "frames"
    for name in ("a", ".hidden", "no_stamps"):
        (root / "class_0" / name).mkdir(parents=True)
    for name in ("a", ".hidden"):
        np.save(root / "class_0" / name / "timestamps.npy", np.arange(3.0))
    (root / "class_0" / "gone").symlink_to(root / "nowhere")
    assert is_frame_folder_tree(root)
    src = FrameFolderSource(root, clip_length=2)
    assert [os.path.basename(f) for f in src.files] == ["a"]
    assert set(map(os.path.basename, src.ignored)) == {"no_stamps", "gone", ".hidden"}
    assert src.listing_digest().startswith("1 files, sha256 ")
