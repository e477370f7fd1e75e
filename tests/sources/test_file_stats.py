"""Listings that read directories only: each file's size and time taken on first use
(dali_pipes.sources.file_stats), with the same digest as a listing that stats as it lists."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dali_pipes.sources import ImageFolderSource, list_class_folders
from dali_pipes.sources.image import IMAGE_EXTENSIONS
from dali_pipes.sources.names import PathTable, PathTableBuilder
from tests.conftest import write_image_folder
from torch_bridge import make_loader


@pytest.fixture
def root(tmp_path):
    return write_image_folder(tmp_path / "data", n_images=6, n_classes=2)


def test_lazy_listing_stats_on_first_use_and_digests_as_the_eager_one(root):
    lazy = list_class_folders(root, IMAGE_EXTENSIONS, "image", recursive=True)
    eager = list_class_folders(root, IMAGE_EXTENSIONS, "image", recursive=True,
                               file_stats="listing")
    assert not lazy.stats.taken and eager.stats.taken
    assert lazy.files == eager.files and (lazy.labels == eager.labels).all()
    assert lazy.digest() == eager.digest() and lazy.stats.taken
    sizes = np.array([os.stat(f).st_size for f in lazy.files])
    assert (lazy.sizes == sizes).all() and (lazy.mtimes_ns == eager.mtimes_ns).all()


def test_a_file_gone_before_first_use_changes_the_digest(root):
    eager = ImageFolderSource(root, file_stats="listing")
    lazy = ImageFolderSource(root)
    victim = lazy.files[3]
    with open(victim, "rb") as f:
        data = f.read()
    os.remove(victim)
    assert lazy.listing_digest() != eager.listing_digest()
    assert lazy.listing.sizes[3] == -1 and lazy.listing.mtimes_ns[3] == -1
    with open(victim, "wb") as f:  # the same bytes back, with a new mtime: still changed
        f.write(data)
    assert ImageFolderSource(root).listing_digest() != eager.listing_digest()


def test_lazy_stats_survive_pickling_before_and_after_use(root):
    lazy = ImageFolderSource(root)
    early = pickle.loads(pickle.dumps(lazy.listing))
    assert not early.stats.taken and early.digest() == lazy.listing_digest()
    late = pickle.loads(pickle.dumps(lazy.listing))
    assert late.stats.taken and (late.sizes == lazy.listing.sizes).all()


def test_unknown_file_stats_mode_is_refused(root):
    with pytest.raises(ValueError, match="file_stats must be one of"):
        ImageFolderSource(root, file_stats="never")


def test_add_many_equals_one_path_at_a_time():
    names = ["a.jpg", "caf\u00e9.jpg", os.fsdecode(b"x\xff.jpg"), "z.png"]
    one = PathTableBuilder()
    for name in names:
        one.add(os.path.join("/d/c", name))
    many = PathTableBuilder()
    many.add_many("/d/c", names[:2])
    many.add_many("/d/c/", [])
    many.add_many("/d/c", names[2:])
    assert many.build() == one.build() == PathTable.from_paths(
        os.path.join("/d/c", n) for n in names)


def test_a_loader_stats_the_files_on_its_first_state_not_when_made(root):
    loader = make_loader("image", root, backend="torch", batch_size=4, size=32, seed=1,
                         shuffle=False, reference={"num_workers": 0})
    listing = loader._engine.modality.source.listing
    it = iter(loader)
    next(it)
    assert not listing.stats.taken
    state = loader.state_dict()
    assert listing.stats.taken
    eager = ImageFolderSource(root, file_stats="listing").listing_digest()
    assert state["order"]["listing"] == eager
    # the batch yielded before the sizes existed is counted once they do
    assert loader.stats()["bytes_read"] == int(listing.sizes[:4].sum()) > 0
