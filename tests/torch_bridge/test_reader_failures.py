"""Bad files the readers catch, the same way on both backends: corrupt scans, decompression
bombs, FIFOs, names that are not UTF-8 (issue 15, items 4, 5, 6 and 12)."""
from __future__ import annotations

import os
import threading

import pytest
import torchvision.io  # noqa: F401  (imported once here, not per loader)

from dali_pipes.sources import ImageFolderSource
from tests.conftest import BACKENDS, write_image_folder
from tests.formats.jpeg_corruptions import (
    bomb,
    cut_with_eoi,
    encode,
    eoi_inside,
    garbage_with_ff,
    sof_inside,
    swap_restart,
)
from torch_bridge import SampleError, make_loader

CORRUPT = {  # name -> bytes; each passes the old header-and-EOI check
    "garbage.jpg": lambda: garbage_with_ff(encode()),
    "garbage_progressive.jpg": lambda: garbage_with_ff(encode(progressive=True)),
    "cut_restarts.jpg": lambda: cut_with_eoi(encode(restart_marker_rows=1)),
    "restart_order.jpg": lambda: swap_restart(encode(restart_marker_blocks=4)),
    "eoi_inside.jpg": lambda: eoi_inside(encode()),
    "sof_inside.jpg": lambda: sof_inside(encode()),
    "bomb.jpg": lambda: bomb(30000, 30000),
}


def _loader(data, backend, **options):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader("image", data, backend=backend, batch_size=4, size=16, shuffle=False,
                       **extra, **options)


def _pass(loader) -> list[int]:
    return sorted(int(i) for batch in loader for i in batch["index"])


@pytest.fixture(scope="module")
def corrupt_folder(tmp_path_factory):
    root = write_image_folder(tmp_path_factory.mktemp("corrupt"), n_images=6, n_classes=2)
    for name, make in CORRUPT.items():
        (root / "class_1" / name).write_bytes(make())
    return root


def test_both_backends_skip_the_same_corrupt_files(corrupt_folder):
    verdicts = {}
    for backend in BACKENDS:
        loader = _loader(corrupt_folder, backend, on_error="skip")
        kept = _pass(loader)
        skipped = {os.path.basename(s.path): s.reason for s in loader.skipped}
        assert set(skipped) == set(CORRUPT), (backend, skipped)
        assert len(kept) == 6
        verdicts[backend] = (kept, sorted(skipped))
    assert verdicts["dali"] == verdicts["torch"]
    assert "30000x30000" in skipped["bomb.jpg"] and "max_pixels" in skipped["bomb.jpg"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_raise_names_the_corrupt_file(tmp_path, backend):
    root = write_image_folder(tmp_path, n_images=2, n_classes=1)
    (root / "class_0" / "bad.jpg").write_bytes(CORRUPT["eoi_inside.jpg"]())
    with pytest.raises(SampleError, match=r"bad\.jpg.*EOI marker"):
        _pass(_loader(root, backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pixels_is_configurable_and_none_disables_it(tmp_path, backend):
    root = write_image_folder(tmp_path, n_images=4, n_classes=1, sizes=((90, 120), (60, 80)))
    small = _loader(root, backend, on_error="skip", max_pixels=90 * 120 - 1)
    assert _pass(small) == [1, 3] and [s.index for s in small.skipped] == [0, 2]
    assert "pixel count" in small.skipped[0].reason
    assert _pass(_loader(root, backend, max_pixels=None)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="max_pixels"):
        _loader(root, backend, max_pixels=0)


class _Unblock:
    """If a reader ever blocks opening the FIFO, open its write end after `delay` s so the
    test fails on the wrong reason instead of hanging the suite."""

    def __init__(self, fifo: str, delay: float = 30.0):
        self.fifo, self.timer = fifo, threading.Timer(delay, self._poke)
        self.timer.daemon = True

    def _poke(self) -> None:
        try:
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waiting on it: nothing blocks
            pass

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_file_replaced_by_a_fifo_is_a_bad_sample_not_a_hang(tmp_path, backend):
    root = write_image_folder(tmp_path, n_images=3, n_classes=1)
    loader = _loader(root, backend, on_error="skip")
    fifo = root / "class_0" / "img_0001.jpg"
    fifo.unlink()
    os.mkfifo(fifo)
    with _Unblock(str(fifo)):
        assert _pass(loader) == [0, 2]
    (skipped,) = loader.skipped
    assert skipped.path == str(fifo) and "not a regular file" in skipped.reason
    # listed while it is a FIFO: not a sample, and reported
    listing = ImageFolderSource(root).listing
    ignored = dict(zip(listing.ignored, listing.ignored_reasons, strict=True))
    assert ignored == {str(fifo): "not a file"}


def test_names_that_are_not_utf8_load_on_both_backends(tmp_path):
    root = write_image_folder(tmp_path, n_images=4, n_classes=2)
    base = os.fsencode(root)
    os.rename(base + b"/class_0/img_0000.jpg", base + b"/class_0/caf\xe9.jpg")
    os.rename(base + b"/class_1", base + b"/cl\xe9ss_1")
    states = []
    for backend in BACKENDS:
        loader = _loader(root, backend)
        assert _pass(loader) == [0, 1, 2, 3] and not loader.skipped
        states.append(loader.state_dict()["fingerprint"])
    assert states[0] == states[1]
    assert os.fsencode(ImageFolderSource(root).files[0]).endswith(b"caf\xe9.jpg")


def test_a_non_utf8_bad_file_is_named(tmp_path):
    root = write_image_folder(tmp_path, n_images=2, n_classes=1)
    (root / "class_0").joinpath(os.fsdecode(b"\xff\xfe.jpg")).write_bytes(b"")
    loader = _loader(root, "torch", on_error="skip")
    assert _pass(loader) == [0, 1]
    assert os.fsencode(loader.skipped[0].path).endswith(b"\xff\xfe.jpg")
    assert "\\udcff" in ascii(loader.skipped[0])
