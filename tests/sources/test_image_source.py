import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.sources import ImageFolderSource
from tests.conftest import write_image_folder


def test_listing_order_labels_and_reads(image_folder):
    src = ImageFolderSource(image_folder)
    assert len(src) == 37 and src.classes == ("class_0", "class_1", "class_2")
    assert list(src.files) == sorted(src.files)
    assert src.labels.dtype == np.int64 and set(src.labels.tolist()) == {0, 1, 2}
    data, (h, w) = src.read_checked(0)
    assert data.dtype == np.uint8 and (h, w) == (90, 120)


def test_multi_source_shares_class_ids(tmp_path):
    a = write_image_folder(tmp_path / "a", n_images=4, n_classes=2)
    b = write_image_folder(tmp_path / "b", n_images=3, n_classes=3, seed=1)
    src = ImageFolderSource([a, b])
    assert src.classes == ("class_0", "class_1", "class_2")
    assert src.source_ids.tolist() == [0] * 4 + [1] * 3
    assert src.labels.tolist() == [0, 0, 1, 1, 0, 1, 2]


def test_ignored_files_are_listed_not_samples(tmp_path):
    root = write_image_folder(tmp_path / "d", n_images=2, n_classes=1)
    (root / "class_0" / "notes.txt").write_text("x")
    (root / "class_0" / ".hidden.jpg").write_bytes(b"x")
    src = ImageFolderSource(root)
    assert len(src) == 2 and len(src.ignored) == 2


def test_missing_empty_and_flat_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolderSource(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        ImageFolderSource(tmp_path / "empty")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"x")
    with pytest.raises(ValueError, match="no class folders"):
        ImageFolderSource(tmp_path / "flat")
    (tmp_path / "noimg" / "cls").mkdir(parents=True)
    with pytest.raises(ValueError, match="no image files"):
        ImageFolderSource(tmp_path / "noimg")


def test_read_checked_rejects_non_jpeg(tmp_path):
    root = write_image_folder(tmp_path / "d", n_images=1, n_classes=1)
    (root / "class_0" / "zz.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    src = ImageFolderSource(root)
    with pytest.raises(FormatError, match="zz.png"):
        src.read_checked(1)
