"""An epoch without batches (drop_last with a batch larger than a rank's share) is refused
when the loader is made, on both backends and every sampling; the DALI engine's run-ahead
never searches without end for an epoch that has batches."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from torch_bridge import make_loader
from torch_bridge.engines.dali import DaliEngine
from torch_bridge.errors import SampleGuard
from torch_bridge.order.plan import EpochPlan
from torch_bridge.order.repeated import Repeated


def _loader(folder, backend, **kw):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader("image", folder, backend=backend, size=16, **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("kw,per_rank", [
    (dict(batch_size=64), 37),
    (dict(batch_size=20, world_size=2, rank=1), 18),
    (dict(batch_size=64, sampling="repeated"), 37),
    (dict(batch_size=13, sampling="repeated", world_size=3, rank=0), 12),
])
def test_drop_last_without_a_batch_is_refused(image_folder, backend, kw, per_rank):
    with pytest.raises(ValueError, match=rf"drop_last=True with batch_size={kw['batch_size']}"
                                         rf" .* {per_rank} samples per epoch"):
        _loader(image_folder, backend, drop_last=True, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_drop_last_with_one_whole_batch_per_rank_yields_it(image_folder, backend):
    loader = _loader(image_folder, backend, batch_size=18, drop_last=True, world_size=2,
                     rank=0, shuffle=False)
    assert len(loader) == 1
    assert [len(b["index"]) for b in loader] == [18]


def test_plan_refuses_drop_last_with_fewer_samples_per_rank_than_a_batch():
    with pytest.raises(ValueError, match="batch_size=4 .* 3 samples per epoch"):
        EpochPlan(7, 4, drop_last=True, world_size=2, sampler=Repeated(3))
    assert len(EpochPlan(8, 4, drop_last=True, world_size=2)) == 1


class _EmptyPlan:
    """A plan whose epochs hold no batch (as a plan over data that shrank to nothing would
    be); it counts the epochs asked for and gives up after many."""

    batch_size, rank, world_size = 4, 0, 1

    def __init__(self):
        self.asked = 0

    def __len__(self) -> int:
        return 0

    def num_batches(self, epoch: int) -> int:
        return 0

    def keyed_batches(self, epoch: int, start: int = 0):
        self.asked += 1
        if self.asked > 100:
            raise AssertionError("the run-ahead kept looking for a batch in later epochs")
        return iter(())


def test_run_ahead_stops_at_an_empty_epoch():
    plan = _EmptyPlan()
    engine = DaliEngine(object(), plan, device=_cpu(), config=None, guard=SampleGuard("raise"))
    assert list(itertools.islice(engine._plan_stream(3, 0), 5)) == []
    assert plan.asked <= 2


def test_run_ahead_crosses_a_resumed_epoch_with_nothing_left():
    plan = EpochPlan(10, 4, seed=1)
    plan.set_resumed(plan.resume_after(0, world_size=1, batch_size=4, drop_last=False,
                                       consumed=3))
    engine = DaliEngine(object(), plan, device=_cpu(), config=None, guard=SampleGuard("raise"))
    first = next(engine._plan_stream(0, 0))
    assert first.epoch == 1 and first.position == 0
    np.testing.assert_array_equal(first.indices, plan.rank_indices(1)[:4])


def _cpu():
    import torch
    return torch.device("cpu")
