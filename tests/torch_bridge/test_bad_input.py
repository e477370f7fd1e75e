"""Broken, empty, truncated and non-JPEG files under on_error, on both backends."""
from __future__ import annotations

import pytest

from dali_pipes.sources import ImageFolderSource
from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import SampleError, make_loader

BAD = ("empty.jpg", "text.jpg", "png.jpg", "truncated.jpg", "corrupt.jpg")


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    root = write_image_folder(tmp_path_factory.mktemp("bad"), n_images=20, n_classes=2)
    good = (root / "class_0" / "img_0000.jpg").read_bytes()
    folder = root / "class_1"
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "text.jpg").write_text("this is not an image\n")
    (folder / "png.jpg").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (folder / "truncated.jpg").write_bytes(good[: len(good) * 2 // 3])
    # Passes the cheap header checks; only the decoder finds the problem.
    (folder / "corrupt.jpg").write_bytes(undefined_quant_table(good))
    (folder / "readme.txt").write_text("not a sample")
    return root


def _loader(folder, backend, **kw):
    # DALI pipelines run in this test process too: forked workers must survive that.
    extra = {"reference": {"num_workers": 2}} if backend == "torch" else {}
    return make_loader("image", folder, backend=backend, batch_size=6, size=24, **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_skip_keeps_every_good_sample_and_names_the_bad(bad_folder, backend):
    src = ImageFolderSource(bad_folder)
    bad_index = {src.files.index(str(bad_folder / "class_1" / n)) for n in BAD}
    loader = _loader(bad_folder, backend, on_error="skip")
    for epoch in range(2):
        loader.set_epoch(epoch)
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == sorted(set(range(len(src))) - bad_index)
    skipped = loader.skipped
    assert len(skipped) == 2 * len(BAD)
    assert {s.path.rsplit("/", 1)[-1] for s in skipped} == set(BAD)
    assert {s.index for s in skipped} == bad_index and {s.epoch for s in skipped} == {0, 1}
    assert all(s.reason for s in skipped)


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("name", BAD)
def test_raise_names_file_and_index(tmp_path, backend, name, bad_folder):
    root = write_image_folder(tmp_path / "d", n_images=7, n_classes=1)
    (root / "class_0" / name).write_bytes((bad_folder / "class_1" / name).read_bytes())
    index = ImageFolderSource(root).files.index(str(root / "class_0" / name))
    with pytest.raises(SampleError) as info:
        for _ in _loader(root, backend, shuffle=False):
            pass
    assert name in str(info.value) and f"sample {index}" in str(info.value)


def test_dali_recovers_after_a_decoder_failure_mid_epoch(tmp_path, bad_folder):
    root = write_image_folder(tmp_path / "d", n_images=30, n_classes=1)
    (root / "class_0" / "img_0013.jpg").write_bytes(
        (bad_folder / "class_1" / "corrupt.jpg").read_bytes())
    loader = _loader(root, "dali", on_error="skip", shuffle=False)
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == [i for i in range(30) if i != 13]
    assert [s.index for s in loader.skipped] == [13]
    seen = [i for b in loader for i in b["index"].tolist()]  # the next epoch skips it early
    assert len(seen) == 29 and len(loader.skipped) == 2


def test_missing_or_empty_data_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_loader("image", tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        make_loader("image", tmp_path / "empty")
