"""The loader contract (CONTRACT.md), one test class run against both backends."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.schema import schema_for
from dali_pipes.sources import ImageFolderSource
from tests.conftest import write_image_folder
from torch_bridge import make_loader

SIZE = 32
FAST_TORCH = {"num_workers": 0}


def _loader(folder, backend, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("size", SIZE)
    if backend == "torch":
        kw.setdefault("reference", FAST_TORCH)
    return make_loader("image", folder, backend=backend, **kw)


def _indices(loader):
    return [b["index"].tolist() for b in loader]


@pytest.fixture(params=["dali", "torch"])
def backend(request):
    return request.param


class TestLoaderContract:
    def test_schema(self, image_folder, backend):
        batch = next(iter(_loader(image_folder, backend)))
        schema = schema_for("image")
        assert set(batch) == set(schema)
        for name, (dtype, layout) in schema.items():
            assert batch[name].dtype == getattr(torch, dtype), name
            assert batch[name].dim() == len(layout), name
            assert batch[name].device.type == "cpu"
        assert batch["image"].shape == (8, 3, SIZE, SIZE)
        labels = ImageFolderSource(image_folder).labels
        assert batch["label"].tolist() == labels[batch["index"].numpy()].tolist()

    def test_one_pass_yields_every_index_once(self, image_folder, backend):
        loader = _loader(image_folder, backend)
        seen = [i for b in _indices(loader) for i in b]
        assert len(loader) == 5 and sorted(seen) == list(range(37))

    def test_batches_stay_valid_while_held(self, image_folder, backend):
        """Outputs are views of the backend's buffers where possible: holding every batch
        of two epochs must not let later batches overwrite earlier ones."""
        loader = _loader(image_folder, backend, seed=3)
        held = [b for _ in range(2) for b in loader]
        fresh = _loader(image_folder, backend, seed=3)
        copies = [{k: v.clone() for k, v in b.items()} for _ in range(2) for b in fresh]
        for a, b in zip(held, copies):
            assert torch.equal(a["index"], b["index"]) and torch.equal(a["image"], b["image"])

    def test_drop_last(self, image_folder, backend):
        loader = _loader(image_folder, backend, drop_last=True)
        sizes = [len(b) for b in _indices(loader)]
        assert len(loader) == 4 and sizes == [8] * 4

    def test_epochs_reshuffle_and_seed_fixes_order(self, image_folder, backend):
        loader = _loader(image_folder, backend, seed=5)
        first, second = _indices(loader), _indices(loader)  # a full pass advances the epoch
        assert first != second
        loader.set_epoch(0)
        assert _indices(loader) == first
        assert _indices(_loader(image_folder, backend, seed=6)) != first

    def test_resume_is_exact(self, image_folder, backend):
        reference = _loader(image_folder, backend, seed=1)
        reference.set_epoch(3)
        full = list(reference)
        loader = _loader(image_folder, backend, seed=1)
        loader.set_epoch(3)
        it = iter(loader)
        next(it), next(it)
        state = loader.state_dict()
        assert state["epoch"] == 3 and state["batches_consumed"] == 2
        resumed = _loader(image_folder, backend, seed=1)
        resumed.load_state_dict(state)
        resumed.set_epoch(3)  # a resumed loop calls set_epoch as usual
        rest = list(resumed)
        assert len(rest) == len(full) - 2
        for a, b in zip(full[2:], rest):
            assert torch.equal(a["index"], b["index"])
            torch.testing.assert_close(a["image"], b["image"])
        assert resumed.state_dict()["epoch"] == 4

    def test_state_from_another_data_set_is_refused(self, image_folder, backend, tmp_path):
        other = write_image_folder(tmp_path / "o", n_images=5, n_classes=1)
        state = _loader(image_folder, backend).state_dict()
        with pytest.raises(ValueError, match="num_samples"):
            _loader(other, backend).load_state_dict(state)

    def test_shards_equal_length_disjoint_covering(self, image_folder, backend):
        shards = [_indices(_loader(image_folder, backend, rank=r, world_size=3))
                  for r in range(3)]
        assert len({len(s) for s in shards}) == 1
        flat = [i for s in shards for b in s for i in b]
        assert set(flat) == set(range(37)) and len(flat) == 39  # 2 padding samples

    def test_eval_mode_is_deterministic(self, image_folder, backend):
        loader = _loader(image_folder, backend, train=False, shuffle=False)
        a, b = next(iter(loader)), next(iter(loader))
        torch.testing.assert_close(a["image"], b["image"])

    def test_multi_source_batches_hold_source_id(self, tmp_path, backend):
        a = write_image_folder(tmp_path / "a", n_images=5, n_classes=2)
        b = write_image_folder(tmp_path / "b", n_images=4, n_classes=2, seed=3)
        batches = list(_loader([a, b], backend, shuffle=False, batch_size=4))
        ids = torch.cat([x["source_id"] for x in batches]).tolist()
        assert ids == [0] * 5 + [1] * 4


def test_backends_agree_on_order_and_crops(image_folder):
    dali = list(_loader(image_folder, "dali", seed=9))
    ref = list(_loader(image_folder, "torch", seed=9))
    assert len(dali) == len(ref)
    for a, b in zip(dali, ref):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["label"], b["label"])
        diff = (a["image"] - b["image"]).abs()
        # Different JPEG decoders and resize kernels: close, not identical. A wrong crop
        # window or a missed flip gives mean differences of 0.3 and more.
        assert diff.mean() < 0.05, diff.mean()


def test_reference_with_workers_matches_in_process(image_folder):
    a = list(_loader(image_folder, "torch", seed=2))
    b = list(_loader(image_folder, "torch", seed=2, reference={"num_workers": 2}))
    for x, y in zip(a, b):
        torch.testing.assert_close(x["image"], y["image"])


def test_bad_arguments(image_folder):
    with pytest.raises(ValueError, match="backend"):
        make_loader("image", image_folder, backend="jax")
    with pytest.raises(ValueError, match="modality"):
        make_loader("audio", image_folder)
    with pytest.raises(ValueError, match="device"):
        make_loader("image", image_folder, device="tpu")
    with pytest.raises(ValueError, match="on_error"):
        make_loader("image", image_folder, on_error="ignore")
    with pytest.raises(ValueError, match="preset"):
        make_loader("image", image_folder, config="nope")


def test_rank_from_environment(image_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = _loader(image_folder, "dali")
    assert loader.plan.rank == 1 and loader.plan.world_size == 2 and len(loader) == 3


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_cuda_batches_are_on_the_gpu_and_match_cpu(image_folder, backend):
    gpu = next(iter(_loader(image_folder, backend, device="cuda", seed=4)))
    cpu = next(iter(_loader(image_folder, "torch", seed=4)))
    assert all(t.device.type == "cuda" for t in gpu.values())
    assert torch.equal(gpu["index"].cpu(), cpu["index"])
    assert (gpu["image"].cpu() - cpu["image"]).abs().mean() < 0.05
