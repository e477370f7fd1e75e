"""The batch-wide erasing and mixing used on GPUs (no host sync, no per-row Python step)
give exactly the host path's pixels; run here on the CPU, where both paths exist."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.erasing import erase_boxes, erase_noise
from dali_pipes.mixing import MixParams
from torch_bridge.erasing import erase_on_device
from torch_bridge.mixing import _mix_in_place, mix_on_device


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
