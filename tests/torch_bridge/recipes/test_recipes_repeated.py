"""Repeated augmentation (issue 12 item 7): sampling="repeated" with repeats=k."""
from __future__ import annotations

import collections

import pytest
import torch

from torch_bridge import make_loader


def _loader(folder, backend="dali", **kw):
    kw = {"batch_size": 6, "seed": 2, "size": 32, "sampling": "repeated", **kw}
    if backend == "torch":
        kw["reference"] = {"num_workers": 0}
    return make_loader("image", folder, backend=backend, **kw)


def test_each_index_k_times_with_new_augmentation(image_folder):
    batches = [{k: v.clone() for k, v in b.items()} for b in _loader(image_folder)]
    seen = [i for b in batches for i in b["index"].tolist()]
    assert len(seen) == 37
    counts = collections.Counter(seen)
    assert sorted(set(counts.values()))[-1] == 3 and len(counts) == 13  # ceil(37 / 3)
    images = {}
    for b in batches:
        for i, img in zip(b["index"].tolist(), b["image"], strict=True):
            images.setdefault(i, []).append(img)
    copies = next(v for v in images.values() if len(v) == 3)
    assert not torch.equal(copies[0], copies[1])  # each draw augmented anew


def test_copies_go_to_different_ranks(image_folder):
    per_rank = [[i for b in _loader(image_folder, rank=r, world_size=3) for i in
                 b["index"].tolist()] for r in range(3)]
    sets = [set(r) for r in per_rank]
    # 37 = 12 images x 3 copies + 1: the 12 are on every rank, once each (the plan pads
    # the ranks to 13 entries each with wrapped-around entries)
    assert len(sets[0] & sets[1] & sets[2]) >= 12
    assert all(len(r) - len(set(r)) <= 1 for r in per_rank)


def test_backends_agree_and_resume(image_folder):
    dali = [{k: v.clone() for k, v in b.items()} for b in _loader(image_folder, repeats=2)]
    ref = list(_loader(image_folder, "torch", repeats=2))
    for a, b in zip(dali, ref, strict=True):
        assert torch.equal(a["index"], b["index"])
        assert (a["image"] - b["image"]).abs().mean() < 0.05
    first = _loader(image_folder, repeats=2)
    it = iter(first)
    next(it), next(it)
    resumed = _loader(image_folder, repeats=2)
    resumed.load_state_dict(first.state_dict())
    rest = list(resumed)
    assert all(torch.equal(a["image"], b["image"]) for a, b in zip(dali[2:], rest, strict=True))


def test_bad_repeats(image_folder):
    with pytest.raises(ValueError, match="repeats must be a positive int"):
        _loader(image_folder, repeats=0)
    with pytest.raises(ValueError, match="repeats=2 applies only with sampling='repeated'"):
        _loader(image_folder, sampling="uniform", repeats=2)
