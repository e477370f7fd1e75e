"""PathTable: a listing's paths in numpy arrays, behaving as the tuple of str it replaces."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dali_pipes.sources import ImageFolderSource, list_class_folders
from dali_pipes.sources.folders import listing_digest
from dali_pipes.sources.image import IMAGE_EXTENSIONS
from dali_pipes.sources.names import PathTable
from tests.conftest import write_image_folder

PATHS = ["/d/a/x.jpg", "/d/a/y.jpg", "/d/b/sub/z.png", os.fsdecode(b"/d/c\xe9/caf\xe9.jpg"),
         "bare.jpg", "/d/a/x.jpg.bak", "/d/a/ spaced name.jpg"]


def test_it_reads_back_as_the_paths_it_was_made_from():
    table = PathTable.from_paths(iter(PATHS))  # a generator is enough
    assert len(table) == len(PATHS) and list(table) == PATHS and table == PATHS
    assert [table[i] for i in range(-len(PATHS), 0)] == PATHS
    assert table[1:4] == PATHS[1:4] and table[::-2] == PATHS[::-2]
    assert tuple(reversed(table)) == tuple(reversed(PATHS))
    assert table.raw(3) == b"/d/c\xe9/caf\xe9.jpg"  # not UTF-8: the bytes it was listed with
    assert table.folders == (b"/d/a/", b"/d/b/sub/", b"/d/c\xe9/", b"")
    with pytest.raises(IndexError, match="out of range for 7 paths"):
        table[7]


def test_index_and_membership_as_a_tuple():
    table = PathTable.from_paths(PATHS)
    for i, path in enumerate(PATHS):
        assert table.index(path) == i and path in table
    with pytest.raises(ValueError, match="not in the listing"):
        table.index("/d/a/x.jpg", 1)
    assert "/d/a/nope.jpg" not in table and "/elsewhere/x.jpg" not in table and 3 not in table


def test_it_pickles_as_arrays_and_compares_by_content():
    table = PathTable.from_paths(PATHS)
    back = pickle.loads(pickle.dumps(table))
    assert back == table and list(back) == PATHS
    assert table != PathTable.from_paths(PATHS[:-1]) and table != PATHS[::-1]
    empty = PathTable.from_paths([])
    assert len(empty) == 0 and list(empty) == [] and empty.nbytes == 0


def test_the_listing_keeps_no_str_per_file(tmp_path):
    root = write_image_folder(tmp_path / "data", n_images=6, n_classes=2)
    listing = list_class_folders(root, IMAGE_EXTENSIONS, "image", recursive=True)
    files = listing.files
    assert isinstance(files, PathTable) and len(files.folders) == 2
    assert files.names.dtype == np.uint8 and files.ends.dtype == np.int64
    assert files.folder_ids.dtype == np.int32 and len(files.folder_ids) == 6
    assert files == sorted(str(p) for p in root.glob("*/*.jpg"))


def test_the_digest_is_the_one_of_the_same_paths_as_str(tmp_path):
    """The digest goes into resume states: a PathTable must hash exactly as the tuple of
    str the listing held before (names relative to their root, as bytes)."""
    root = write_image_folder(tmp_path / "data", n_images=4, n_classes=2)
    base = os.fsencode(root)
    os.rename(base + b"/class_0/img_0000.jpg", base + b"/class_0/caf\xe9.jpg")
    os.makedirs(base + b"/class_1/deep/er")
    os.rename(base + b"/class_1/img_0001.jpg", base + b"/class_1/deep/er/a b.jpg")
    src = ImageFolderSource([root, str(root) + "/"])
    listing = src.listing
    as_str = tuple(listing.files)
    args = (listing.roots, listing.source_ids, listing.sizes, listing.mtimes_ns)
    assert src.listing_digest() == listing_digest(as_str, *args)
    other = tuple(reversed(as_str))
    assert listing_digest(PathTable.from_paths(other), *args) == listing_digest(other, *args)
    assert src.listing_digest() != listing_digest(other, *args)
