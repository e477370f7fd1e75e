"""The batch-wide erasing and mixing used on GPUs (no host sync, no per-row Python step)
give exactly the host path's pixels; run here on the CPU, where both paths exist."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.recipes.erasing import erase_boxes, erase_noise
from dali_pipes.recipes.mixing import MixParams
from torch_bridge.recipes.erasing import erase_on_device
from torch_bridge.recipes.mixing import _mix_in_place, mix_on_device


def _boxes(n=6, h=20, w=24):
    boxes = erase_boxes(3, 1, np.arange(n, dtype=np.int64), h, w, p=0.7, scale=(0.02, 0.3),
                        ratio=(0.3, 3.3))
    assert boxes[:, 2].any() and not boxes[:, 2].all()  # some rows erased, some not
    return boxes


@pytest.mark.parametrize("value", ["random", 0.5])
def test_batch_wide_erase_equals_box_by_box(value):
    boxes, images = _boxes(), torch.randn(6, 3, 20, 24)
    want = images.clone()
    rows = np.flatnonzero(boxes[:, 2])
    noise = [erase_noise(3, 1, r, (3, *boxes[r, 2:].tolist())) for r in rows] \
        if value == "random" else None
    for k, r in enumerate(rows):
        top, left, h, w = boxes[r].tolist()
        want[r, :, top:top + h, left:left + w] = torch.from_numpy(noise[k]) if noise \
            else value
    got = erase_on_device(images.contiguous(memory_format=torch.channels_last), boxes,
                          noise, value)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_batch_wide_mix_equals_row_by_row(dtype):
    rng = np.random.default_rng(0)
    perm = rng.permutation(6)
    lam = np.array([1.0, 0.3, 0.75, 1.0, 0.5, 0.9])
    boxes = np.array([[2, 9, 3, 11], [0, 0, 0, 0], [5, 20, 0, 24], [0, 0, 0, 0],
                      [1, 4, 1, 4], [0, 20, 0, 24]])
    images = torch.randn(6, 3, 20, 24) * 60 + 120
    images = images.clamp(0, 255).round().to(dtype)
    want = images.clone()
    _mix_in_place(want, perm, lam, boxes)
    got = mix_on_device(images.clone(), torch.from_numpy(perm),
                        torch.from_numpy(lam.astype(np.float32)), torch.from_numpy(boxes))
    assert torch.equal(got, want)
    assert isinstance(MixParams, type)


def test_erasing_keys_come_from_the_host_copy_not_the_staged_index(image_folder):
    """attach_meta gives the staged "index" tensor its host copy; erasing reads it there,
    never the device copy (an index on the "meta" device cannot be read: reading it
    raises)."""
    from torch_bridge import make_loader
    ld = make_loader("image", image_folder, batch_size=4, size=32, seed=1, erasing=1.0)
    modality = ld._engine.modality
    batch = next(iter(ld))
    keys = batch["index"].numpy()
    assert np.array_equal(batch["index"].host_copy, keys)  # set by attach_meta
    index = torch.empty(len(keys), dtype=torch.int64, device="meta")
    index.host_copy = keys
    raw = {"image": torch.randn(len(keys), 3, 32, 32), "index": index}
    want = raw["image"].clone()
    got = modality.after_batch(raw, 0, 0)["image"]
    from torch_bridge.recipes.erasing import erase_batch
    assert torch.equal(got, erase_batch(want, keys, seed=1, epoch=0, recipe=modality.recipe))
