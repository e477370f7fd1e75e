"""dali_from_dataset: a user's Dataset of (encoded JPEG, label) and Sampler through our graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, Sampler

from dali_pipes.sources import ImageFolderSource
from tests.conftest import undefined_quant_table
from torch_bridge import SampleError, make_loader
from torch_bridge.integrations.adapter import dali_from_dataset

SIZE = 32
BATCH = 8


class JpegDataset(Dataset):
    """What a user already has: the file's bytes (as `kind`) and its label."""

    def __init__(self, folder, kind: str = "bytes", replace: dict | None = None):
        source = ImageFolderSource(folder)
        self.files, self.labels = source.files, source.labels
        self.kind, self.replace = kind, replace or {}

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index):
        data = self.replace.get(index)
        if data is None:
            with open(self.files[index], "rb") as f:
                data = f.read()
        if self.kind == "numpy":
            data = np.frombuffer(data, dtype=np.uint8).copy()
        elif self.kind == "tensor":
            data = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return data, int(self.labels[index])


class FixedSampler(Sampler):
    """A fixed list of indices (with repeats); records set_epoch calls."""

    def __init__(self, indices):
        self.indices, self.epochs = list(indices), []

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self):
        return iter(self.indices)

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def _adapter(dataset, sampler=None, **kw):
    kw.setdefault("batch_size", BATCH)
    kw.setdefault("size", SIZE)
    kw.setdefault("num_workers", 0)
    return dali_from_dataset(dataset, sampler, **kw)


def _indices(loader):
    return [i for batch in loader for i in batch["index"].tolist()]


def test_schema_and_dtypes(image_folder):
    dataset = JpegDataset(image_folder)
    loader = _adapter(dataset)
    batches = list(loader)
    assert len(loader) == len(batches) == 5
    batch = batches[0]
    assert set(batch) == {"image", "label", "index"}
    assert batch["image"].dtype == torch.float32 and batch["image"].shape == (8, 3, SIZE, SIZE)
    assert batch["label"].dtype == torch.int64 and batch["label"].shape == (8,)
    assert batch["index"].dtype == torch.int64 and batch["index"].shape == (8,)
    assert batches[-1]["image"].shape == (5, 3, SIZE, SIZE)
    for b in batches:
        assert b["label"].tolist() == dataset.labels[b["index"].numpy()].tolist()


@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_bytes_array_and_tensor_items_give_the_same_batches(image_folder, kind):
    want = next(iter(_adapter(JpegDataset(image_folder))))
    got = next(iter(_adapter(JpegDataset(image_folder, kind))))
    assert torch.equal(got["index"], want["index"])
    assert torch.equal(got["image"], want["image"])


def test_sequential_sampler_order_and_drop_last(image_folder):
    dataset = JpegDataset(image_folder)
    assert _indices(_adapter(dataset)) == list(range(37))
    loader = _adapter(dataset, drop_last=True)
    assert len(loader) == 4 and _indices(loader) == list(range(32))


def test_custom_sampler_order_is_kept_with_workers(image_folder):
    order = [5, 3, 36, 0, 3, 17, 30, 2, 2, 11, 8]
    dataset = JpegDataset(image_folder)
    batches = list(_adapter(dataset, FixedSampler(order), num_workers=2))
    assert [b["index"].tolist() for b in batches] == [order[:8], order[8:]]
    assert batches[0]["label"].tolist() == dataset.labels[order[:8]].tolist()
    repeat = batches[0]["image"]  # index 3 at positions 1 and 4: same crop in one epoch
    assert torch.equal(repeat[1], repeat[4])


@pytest.mark.parametrize("train", [True, False])
def test_values_equal_the_image_loader(image_folder, train):
    adapter = _adapter(JpegDataset(image_folder), seed=7, train=train, num_workers=2)
    loader = make_loader("image", image_folder, backend="dali", shuffle=False, seed=7,
                         batch_size=BATCH, size=SIZE, train=train)
    for epoch in (0, 3):
        adapter.set_epoch(epoch)
        loader.set_epoch(epoch)
        got, want = list(adapter), list(loader)
        assert len(got) == len(want) == 5
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a["index"], b["index"]) and torch.equal(a["label"], b["label"])
            torch.testing.assert_close(a["image"], b["image"], atol=1e-5, rtol=0)


def test_epochs_change_augmentation_and_reach_the_sampler(image_folder):
    sampler = FixedSampler(range(8))
    loader = _adapter(JpegDataset(image_folder), sampler)
    first = next(iter(loader))["image"]
    loader.set_epoch(4)
    assert sampler.epochs == [4] and loader.epoch == 4
    fourth = list(loader)[0]["image"]
    assert not torch.equal(first, fourth)
    assert loader.epoch == 5 and sampler.epochs == [4, 5]  # a full pass advances both
    loader.set_epoch(4)
    assert torch.equal(list(loader)[0]["image"], fourth)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_unreadable_item_raises_naming_its_index(image_folder, num_workers):
    dataset = JpegDataset(image_folder, replace={13: b"GIF89a not a jpeg"})
    with _adapter(dataset, num_workers=num_workers) as loader:
        with pytest.raises(SampleError, match=r"sample 13 \(JpegDataset\[13\]\).*GIF "
                           r"trailer: truncated") as err:
            list(loader)
        assert err.value.index == 13
        dataset.replace.clear()  # fixed: the next pass runs (workers restarted), complete
        assert _indices(loader) == list(range(37))


def test_undecodable_item_raises_naming_its_index(image_folder):
    good = open(ImageFolderSource(image_folder).files[9], "rb").read()
    dataset = JpegDataset(image_folder, replace={9: undefined_quant_table(good)})
    with pytest.raises(SampleError, match=r"sample 9 \(JpegDataset\[9\]\)") as err:
        list(_adapter(dataset))
    assert err.value.index == 9


def test_item_of_the_wrong_type_names_index_and_type(image_folder):
    dataset = JpegDataset(image_folder)
    dataset.kind = "text"
    dataset.replace = {2: "a path, not bytes"}
    with pytest.raises(SampleError, match=r"sample 2 .*TypeError.*got str"):
        list(_adapter(dataset))


@pytest.mark.parametrize("option", [{"batch_size": 0}, {"num_workers": -1},
                                    {"size": 0}, {"device": "tpu"}])
def test_bad_options_are_rejected(image_folder, option):
    with pytest.raises(ValueError, match=next(iter(option))):
        _adapter(JpegDataset(image_folder), **option)


def test_epoch_shorter_than_the_prefetch_depth(image_folder):
    """One batch per epoch, three in flight: the pipeline's first prefetch is padded with
    repeats that must never reach the consumer, in this pass or the next."""
    loader = _adapter(JpegDataset(image_folder), batch_size=64,
                      config={"prefetch_queue_depth": 3})
    for _ in range(3):
        batches = list(loader)
        assert len(batches) == 1 and batches[0]["index"].tolist() == list(range(37))


def test_items_of_every_format_folders_take(tmp_path):
    """PNG, WebP and BMP items decode as the image loader decodes the same files."""
    from PIL import Image
    for i, fmt in enumerate(["PNG", "WEBP", "BMP", "PNG", "WEBP", "BMP", "PNG", "JPEG"]):
        out = tmp_path / f"class_{i % 2}" / f"img_{i}.{fmt.lower()}"
        out.parent.mkdir(parents=True, exist_ok=True)
        pixels = (np.arange(36 * 48 * 3) * (i + 3) % 253).astype(np.uint8)
        Image.fromarray(pixels.reshape(36, 48, 3)).save(
            out, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    adapter = _adapter(JpegDataset(tmp_path), seed=2, train=False, batch_size=4)
    loader = make_loader("image", tmp_path, backend="dali", shuffle=False, seed=2,
                         batch_size=4, size=SIZE, train=False)
    for a, b in zip(list(adapter), list(loader), strict=True):
        assert torch.equal(a["index"], b["index"])
        torch.testing.assert_close(a["image"], b["image"], atol=1e-5, rtol=0)
