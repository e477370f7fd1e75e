"""What a torch DataLoader loop reads besides the batches, on both backends: `dataset`,
`sampler`, `batch_sampler`, `batch_size`, `drop_last`, `num_workers`, and `fields=`
(batches as tuples)."""
from __future__ import annotations

import multiprocessing
import sys

import pytest
import torch

from torch_bridge import make_loader
from torch_bridge.modalities.base import normalize_pixels


def _loader(folder, backend, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("size", 16)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("image", folder, backend=backend, **kw)


def test_dataloader_attributes(image_folder, backend):
    loader = _loader(image_folder, backend, drop_last=True)
    assert loader.batch_size == 8 and loader.drop_last is True
    assert loader.num_workers == 0
    assert len(loader.batch_sampler) == len(loader) == 4
    assert len(loader.sampler) == 32  # 37 samples, the partial batch dropped
    assert loader.batch_sampler.batch_size == 8 and loader.batch_sampler.drop_last


def test_num_workers_are_the_backends_workers(image_folder):
    torch_loader = _loader(image_folder, "torch", reference={"num_workers": 2})
    dali_loader = _loader(image_folder, "dali", config={"py_num_workers": 2})
    assert torch_loader.num_workers == 2 and dali_loader.num_workers == 2
    next(iter(dali_loader))  # the feed workers run now
    assert dali_loader.num_workers == 2
    dali_loader.close()


def test_dataset_entries_are_what_the_batches_say(image_folder, backend):
    loader = _loader(image_folder, backend, seed=4)
    dataset = loader.dataset
    assert len(dataset) == 37
    for batch in loader:
        for index, label in zip(batch["index"].tolist(), batch["label"].tolist(), strict=True):
            entry = dataset.info(index)
            assert entry == {"label": label, "index": index, "path": loader.path(index)}
    assert dataset.info(-1) == dataset.info(36)
    sample = dataset[5]
    assert {k: v for k, v in sample.items() if k != "image"} == dataset.info(5)
    assert sample["image"].dtype == torch.uint8 and sample["image"].shape == (3, 16, 16)
    assert [e["index"] for e in dataset] == list(range(37))  # the sequence protocol
    with pytest.raises(IndexError, match="37 samples"):
        dataset[37]
    with pytest.raises(TypeError, match="ints"):
        dataset["3"]
    assert dataset.classes == loader.classes == ["class_0", "class_1", "class_2"]


def test_dataset_load_is_the_torch_paths_sample(image_folder):
    loader = _loader(image_folder, "torch", seed=5)
    batch = next(iter(loader))
    first = int(batch["index"][0])
    pixels = loader.dataset.load(first, epoch=0)["image"]
    assert pixels.dtype == torch.uint8 and pixels.shape == (3, 16, 16)
    torch.testing.assert_close(normalize_pixels(pixels[None])[0], batch["image"][0])


@pytest.mark.parametrize("world_size, drop_last", [(1, False), (2, False), (3, True)])
def test_sampler_lists_what_the_rank_yields(image_folder, world_size, drop_last):
    loader = _loader(image_folder, "dali", world_size=world_size, rank=world_size - 1,
                     drop_last=drop_last, batch_size=5, seed=1)
    listed = list(loader.batch_sampler)
    sampler, batch_sampler = loader.sampler, loader.batch_sampler
    seen = [b["index"].tolist() for b in loader]
    assert listed == seen and len(batch_sampler) == len(seen)
    assert len(sampler) == sum(map(len, seen))
    loader.set_epoch(0)
    assert list(sampler) == [i for b in seen for i in b]
    assert (sampler.num_replicas, sampler.rank, sampler.drop_last) == \
        (world_size, world_size - 1, drop_last)


@pytest.mark.parametrize("via", ["sampler", "batch_sampler", "dataset"])
def test_set_epoch_through_each_view_is_the_loaders(image_folder, backend, via):
    loader = _loader(image_folder, backend, seed=7)
    getattr(loader, via).set_epoch(3)
    assert loader.epoch == 3 and loader.sampler.epoch == 3
    expected = _loader(image_folder, backend, seed=7)
    first_epoch = [b["index"].tolist() for b in expected]
    expected.set_epoch(3)
    got = [b["index"].tolist() for b in loader]
    assert got == [b["index"].tolist() for b in expected] != first_epoch


def test_fields_give_tuples_of_the_dict_batches_values(image_folder, backend):
    plain = _loader(image_folder, backend, seed=2)
    tuples = _loader(image_folder, backend, seed=2, fields=("label", "image", "index"))
    assert tuples.fields == ("label", "image", "index") and plain.fields is None
    count = 0
    for batch, (target, images, index) in zip(plain, tuples, strict=True):
        assert torch.equal(batch["label"], target) and torch.equal(batch["index"], index)
        torch.testing.assert_close(batch["image"], images)
        count += 1
    assert count == len(plain) == 5


def test_fields_survive_a_resume_and_the_stats(image_folder, backend):
    fields = ("image", "label")
    first = _loader(image_folder, backend, seed=6, fields=fields)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    assert first.stats()["batches"] == 2
    resumed = _loader(image_folder, backend, seed=6, fields=fields)
    resumed.load_state_dict(state)
    plain = _loader(image_folder, backend, seed=6)
    rest = list(plain)[2:]
    got = list(resumed)
    assert len(got) == len(rest) == 3 and resumed.stats()["batches"] == 3
    for (images, labels), batch in zip(got, rest, strict=True):
        assert torch.equal(labels, batch["label"])
        torch.testing.assert_close(images, batch["image"])


def test_an_unknown_field_names_the_batchs_fields(image_folder, backend):
    loader = _loader(image_folder, backend, fields=("image", "target"))
    with pytest.raises(ValueError, match=r"'target' is not a field .* 'image', 'label', "
                                         r"'index'"):
        next(iter(loader))


@pytest.mark.parametrize("fields, error", [
    ("image", TypeError), (("image", 3), TypeError), ((), ValueError),
    (("image", "image"), ValueError)])
def test_fields_must_be_distinct_names(image_folder, fields, error):
    with pytest.raises(error, match="fields"):
        _loader(image_folder, "dali", fields=fields)


def test_the_torch_backend_starts_nothing_until_the_first_pass(image_folder, monkeypatch):
    """Making a torch-backend loader imports no decoder (seconds, for torchvision) and
    starts no worker; the first pass does both."""
    before = set(multiprocessing.active_children())
    with monkeypatch.context() as hidden:  # any import of torchvision fails in here
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            hidden.setitem(sys.modules, name, None)
        hidden.setitem(sys.modules, "torchvision", None)
        loader = _loader(image_folder, "torch", reference={"num_workers": 1})
        assert set(multiprocessing.active_children()) == before
    next(iter(loader))
    assert len(set(multiprocessing.active_children()) - before) == 1
    loader.close()
