"""The loader contract on images (torch_bridge.testing.loader_contract), plus what only
images have."""
from __future__ import annotations

import re

import pytest
import torch

from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import LoaderContract, truncate

SIZE = 32
FAST_TORCH = {"num_workers": 0}


class TestImageContract(LoaderContract):
    kind, main, sample_shape = "image", "image", (3, 16, 16)
    # Different JPEG decoders and resize kernels: close, not identical. A wrong crop window
    # or a missed flip gives mean differences of 0.3 and more.
    tolerance = 0.05

    def break_samples(self, root, modality):
        truncate(modality.path(1))
        return {1}, re.escape(modality.path(1)), ""


def _loader(folder, backend, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("size", SIZE)
    if backend == "torch":
        kw.setdefault("reference", FAST_TORCH)
    return make_loader("image", folder, backend=backend, **kw)


def test_batches_stay_valid_while_held(image_folder, backend):
    """Outputs are views of the backend's buffers where possible: holding every batch
    of two epochs must not let later batches overwrite earlier ones."""
    loader = _loader(image_folder, backend, seed=3)
    held = [b for _ in range(2) for b in loader]
    fresh = _loader(image_folder, backend, seed=3)
    copies = [{k: v.clone() for k, v in b.items()} for _ in range(2) for b in fresh]
    for a, b in zip(held, copies, strict=True):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["image"], b["image"])


def test_eval_mode_is_deterministic(image_folder, backend):
    loader = _loader(image_folder, backend, train=False, shuffle=False)
    a, b = next(iter(loader)), next(iter(loader))
    torch.testing.assert_close(a["image"], b["image"])


def test_backends_agree_on_a_larger_set(image_folder):
    """37 images at 32 pixels: the same indices and close crops on both backends."""
    dali = list(_loader(image_folder, "dali", seed=9))
    ref = list(_loader(image_folder, "torch", seed=9))
    assert len(dali) == len(ref) == 5
    for a, b in zip(dali, ref, strict=True):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["label"], b["label"])
        diff = (a["image"] - b["image"]).abs()
        assert diff.mean() < 0.05, diff.mean()


def test_reference_with_workers_matches_in_process(image_folder):
    a = list(_loader(image_folder, "torch", seed=2))
    b = list(_loader(image_folder, "torch", seed=2, reference={"num_workers": 2}))
    for x, y in zip(a, b, strict=True):
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
