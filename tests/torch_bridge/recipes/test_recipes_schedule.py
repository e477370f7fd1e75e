"""Resolution schedule (issue 12 item 6): `size` as a {first_epoch: size} table or a
function of the epoch, without a pipeline rebuild, the same on both backends, resume-safe."""
from __future__ import annotations

import pytest
import torch

from dali_pipes.recipes import image_recipe, size_at
from dali_pipes.recipes.files import load_recipe
from torch_bridge import make_loader

TABLE = {0: 16, 2: (24, 32)}


def _loader(folder, backend, **kw):
    kw = {"batch_size": 8, "seed": 1, **kw}
    if backend == "torch":
        kw["reference"] = {"num_workers": 0}
    return make_loader("image", folder, backend=backend, **kw)


def test_size_at_follows_the_table_and_functions():
    rec = image_recipe(size=TABLE)
    assert [size_at(rec, e) for e in (0, 1, 2, 9)] == [(16, 16), (16, 16), (24, 32), (24, 32)]
    fn = image_recipe(size=lambda e: 16 + 8 * e)
    assert size_at(fn, 3) == (40, 40)
    with pytest.raises(ValueError, match="size function at epoch 4"):
        size_at(image_recipe(size=lambda e: 16 if e < 4 else 0), 4)


@pytest.mark.parametrize("bad", [{}, {1: 16}, {0: 16, -1: 8}, {0: 0}])
def test_bad_tables_raise(image_folder, bad):
    with pytest.raises(ValueError, match="size="):
        _loader(image_folder, "dali", size=bad)


def test_schedule_on_both_backends_without_rebuild(image_folder):
    shapes, pipes = {}, set()
    for backend in ("dali", "torch"):
        loader = _loader(image_folder, backend, size=TABLE, auto_augment="trivialaugment")
        epochs = []
        for _ in range(3):
            epochs.append([b["image"].clone() for b in loader])
            if backend == "dali":
                pipes.add(id(loader._engine.build()))  # the pipeline it ran, kept
        shapes[backend] = [e[0].shape[-2:] for e in epochs]
        if backend == "dali":
            dali = epochs
        else:
            ref = epochs
    assert shapes["dali"] == shapes["torch"] == [(16, 16), (16, 16), (24, 32)]
    assert len(pipes) == 1
    for a, b in zip(dali[2], ref[2], strict=True):
        assert (a - b).abs().mean() < 0.1


def test_schedule_resumes_in_a_later_epoch(image_folder):
    kw = dict(size=TABLE, mixup=0.5)
    full = _loader(image_folder, "dali", **kw)
    for _ in range(2):
        list(full)
    want = [{k: v.clone() for k, v in b.items()} for b in full]
    first = _loader(image_folder, "dali", **kw)
    first.set_epoch(2)
    it = iter(first)
    got = [{k: v.clone() for k, v in next(it).items()}]
    resumed = _loader(image_folder, "dali", **kw)
    resumed.load_state_dict(first.state_dict())
    got += [{k: v.clone() for k, v in b.items()} for b in resumed]
    assert len(got) == len(want) and got[0]["image"].shape[-2:] == (24, 32)
    for g, w in zip(got, want, strict=True):
        assert all(torch.equal(g[k], w[k]) for k in w)


def test_ffcv_preset_schedule():
    rec = image_recipe(**load_recipe("ffcv-rn50", train=True))
    assert size_at(rec, 70) == (160, 160) and size_at(rec, 71) == (192, 192)
