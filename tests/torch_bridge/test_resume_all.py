"""Exact resume for every modality (frame folders included) on both backends.

A loader stopped anywhere, saved with state_dict() and loaded into a fresh loader yields the
remaining batches of an uninterrupted run: same indices and identical tensors (DALI against
DALI, torch against torch), mid-epoch, across an epoch boundary, and with the samplers
(class_balanced, min_per_source over two sources).
"""
from __future__ import annotations

import pytest
import torch

from tests.conftest import MODALITY_KINDS

BACKENDS = ("dali", "torch")
EPOCHS = 3
_runs: dict = {}  # (kind, backend, scenario) -> batches of epochs 0..EPOCHS-1


def _scenario(data, scenario: str) -> dict:
    """make_loader arguments of a scenario on this modality's tiny data."""
    if scenario == "uniform":
        return {}
    if scenario == "class_balanced":
        return {"sampling": "class_balanced"}
    per_source = data.options["batch_size"] // 4 or 1  # 1 of 2 (clips), 4 of 16 (patches)
    return {"data": data.two, "min_per_source": per_source}


def _make(data, backend, scenario, **overrides):
    return data.loader(backend, seed=7, **_scenario(data, scenario), **overrides)


def _copy(batch):
    return {name: value.clone() for name, value in batch.items()}


def _pass(loader):
    return [_copy(b) for b in loader]


def _uninterrupted(data, backend, scenario):
    key = (data.kind, backend, scenario)
    if key not in _runs:
        loader = _make(data, backend, scenario)
        _runs[key] = [_pass(loader) for _ in range(EPOCHS)]
        loader.close()
    return _runs[key]


def _indices(batches):
    return [b["index"].tolist() for b in batches]


def _assert_same(got, want):
    assert _indices(got) == _indices(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for name in w:
            assert g[name].dtype == w[name].dtype, name
            assert torch.equal(g[name], w[name]), name


def _resumed(data, backend, scenario, state, **overrides):
    loader = _make(data, backend, scenario, **overrides)
    loader.load_state_dict(state)
    assert {k: loader.state_dict()[k] for k in ("epoch", "batches_consumed")} == \
        {k: state[k] for k in ("epoch", "batches_consumed")}
    return loader


@pytest.fixture(params=MODALITY_KINDS)
def data(request, tiny_data):
    return tiny_data(request.param)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scenario", ["uniform", "class_balanced", "min_per_source"])
def test_resume_mid_epoch(data, backend, scenario):
    full = _uninterrupted(data, backend, scenario)
    assert len(full[0]) >= 3 and _indices(full[0]) != _indices(full[1])
    loader = _make(data, backend, scenario)
    it = iter(loader)
    head = [_copy(next(it))]
    state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (0, 1)
    resumed = _resumed(data, backend, scenario, state)
    _assert_same(_pass(resumed), full[0][1:])
    _assert_same(_pass(resumed), full[1])  # and the next epoch as usual
    assert resumed.state_dict()["epoch"] == 2
    # saving did not disturb the loader it was taken from
    _assert_same(head + [_copy(b) for b in it], full[0])
    loader.close(), resumed.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_across_an_epoch_boundary(data, backend):
    full = _uninterrupted(data, backend, "uniform")
    loader = _make(data, backend, "uniform")
    _assert_same(_pass(loader), full[0])
    at_boundary = loader.state_dict()
    assert (at_boundary["epoch"], at_boundary["batches_consumed"]) == (1, 0)
    it = iter(loader)
    _assert_same([_copy(next(it)), _copy(next(it))], full[1][:2])
    mid_next = loader.state_dict()
    assert (mid_next["epoch"], mid_next["batches_consumed"]) == (1, 2)
    resumed = _resumed(data, backend, "uniform", at_boundary)
    _assert_same(_pass(resumed), full[1])
    _assert_same(_pass(resumed), full[2])
    resumed = _resumed(data, backend, "uniform", mid_next)
    resumed.set_epoch(1)  # a resumed loop calls set_epoch as usual: the position is kept
    _assert_same(_pass(resumed), full[1][2:])
    _assert_same(_pass(resumed), full[2])
    loader.close(), resumed.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_after_the_last_batch_was_taken_but_not_the_end(data, backend):
    """next() took every batch but the pass has not seen StopIteration: the state is at the
    end of epoch 0 and the resumed loader goes on with epoch 1."""
    full = _uninterrupted(data, backend, "uniform")
    loader = _make(data, backend, "uniform")
    it = iter(loader)
    for _ in range(len(loader)):
        next(it)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (0, len(loader))
    resumed = _resumed(data, backend, "uniform", state)
    assert _pass(resumed) == []
    _assert_same(_pass(resumed), full[1])
    loader.close(), resumed.close()


def test_torch_resume_into_a_loader_with_workers(data):
    """Workers change where samples are decoded, not what they hold."""
    full = _uninterrupted(data, "torch", "uniform")
    loader = _make(data, "torch", "uniform")
    it = iter(loader)
    next(it)
    resumed = _resumed(data, "torch", "uniform", loader.state_dict(),
                       reference={"num_workers": 1})
    _assert_same(_pass(resumed), full[0][1:])
    resumed.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_on_another_rank_of_two(data, backend):
    """Each rank's state resumes its own shard."""
    for rank in (0, 1):
        full = _pass(_make(data, backend, "uniform", rank=rank, world_size=2))
        loader = _make(data, backend, "uniform", rank=rank, world_size=2)
        next(iter(loader))
        state = loader.state_dict()
        assert state["rank"] == rank
        resumed = _resumed(data, backend, "uniform", state, rank=rank, world_size=2)
        _assert_same(_pass(resumed), full[1:])
