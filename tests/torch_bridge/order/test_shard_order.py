"""order="shards" (torch_bridge/order/shard_order.py): exactly once, determinism, per-rank shard
locality, equal rank lengths, resume on both backends over real WebDataset shards, and
errors naming the options."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.sources.shard_data import write_shards
from tests.torch_bridge.plan_batches import batches
from torch_bridge import make_loader
from torch_bridge.order.plan import EpochPlan
from torch_bridge.order.shard_order import ShardWindows

SIZES = [5, 3, 7, 4, 6, 2, 8, 5, 5, 4, 9, 1]  # uneven shards, 59 samples
SHARD_IDS = np.repeat(np.arange(len(SIZES)), SIZES)
N = len(SHARD_IDS)


def _plan(window=2, world=1, rank=0, batch=4, **kw):
    return EpochPlan(N, batch, seed=kw.pop("seed", 7), rank=rank, world_size=world,
                     sampler=ShardWindows(SHARD_IDS, window), **kw)


def _ranks(world, **kw):
    return [_plan(world=world, rank=r, **kw) for r in range(world)]


# --- the plan ----------------------------------------------------------------------------

@pytest.mark.parametrize("window", [1, 2, 5, 100])
def test_one_rank_pass_yields_every_index_once(window):
    got = np.concatenate([b for _, b in batches(_plan(window), 0)])
    np.testing.assert_array_equal(np.sort(got), np.arange(N))
    assert not np.array_equal(got, np.arange(N))


@pytest.mark.parametrize("world", [2, 3, 5, 8])
def test_ranks_have_equal_lengths_and_cover_every_index(world):
    plans = _ranks(world)
    assert len({len(p) for p in plans}) == 1 and len({p.samples_per_rank for p in plans}) == 1
    shares = [p.rank_indices(0) for p in plans]
    assert {len(s) for s in shares} == {-(-N // world)}
    assert set(np.concatenate(shares).tolist()) == set(range(N))
    for p in _ranks(world, drop_last=True):  # drop_last: equal, never more than N // world
        assert len(p.rank_indices(0)) == N // world


def test_order_is_deterministic_and_changes_with_epoch_and_seed():
    a, b = _plan(), _plan()
    np.testing.assert_array_equal(a.order(3), b.order(3))
    assert not np.array_equal(a.order(3), a.order(4))
    assert not np.array_equal(a.order(3), _plan(seed=8).order(3))


def test_order_depends_on_the_world_size_not_on_the_batch_size():
    np.testing.assert_array_equal(_plan(world=3, batch=4).order(0),
                                  _plan(world=3, batch=7, drop_last=True).order(0))
    assert not np.array_equal(_plan(world=3).order(0), _plan(world=2).order(0))


def _real(plan: EpochPlan) -> np.ndarray:
    """The rank's share of epoch 0 less the padding at its end."""
    return plan.rank_indices(0)[:len(range(plan.rank, N, plan.world_size))]


def _max_open(shards: np.ndarray) -> int:
    """The most shards "open" at once: read before and again after some position."""
    ids = np.unique(shards)
    first = np.array([np.argmax(shards == s) for s in ids])
    last = np.array([len(shards) - 1 - np.argmax(shards[::-1] == s) for s in ids])
    return max(int(((first <= t) & (t <= last)).sum()) for t in range(len(shards)))


@pytest.mark.parametrize("world,window", [(1, 1), (1, 3), (2, 2), (3, 2), (4, 1)])
def test_each_rank_reads_at_most_window_shards_at_a_time(world, window):
    for plan in _ranks(world, window=window):
        assert _max_open(SHARD_IDS[_real(plan)]) <= window
        for _, batch in batches(plan, 0):
            assert len(set(SHARD_IDS[batch].tolist())) <= 2 * window + 1  # + a padding one
    assert _max_open(SHARD_IDS[EpochPlan(N, 4, seed=7).order(0)]) > 2 * window  # global


def test_a_shard_is_read_by_one_rank_except_at_the_cuts():
    world = 4
    readers = np.zeros(len(SIZES), np.int64)
    for plan in _ranks(world):
        readers[np.unique(SHARD_IDS[_real(plan)])] += 1
    assert readers.min() >= 1 and (readers > 1).sum() <= world - 1


def test_samples_are_shuffled_within_a_window_of_shards():
    stream = _plan(window=3).rank_indices(0)
    shards = SHARD_IDS[stream]
    seen = shards[np.sort(np.unique(shards, return_index=True)[1])]  # first-read order
    members = np.flatnonzero(np.isin(SHARD_IDS, seen[:3]))
    head = stream[:len(members)]
    np.testing.assert_array_equal(np.sort(head), members)  # the first window's samples...
    assert (np.diff(SHARD_IDS[head]) != 0).sum() > 2  # ...mixed, not shard after shard


@pytest.mark.parametrize("drop_last", [False, True])
def test_elastic_resume_under_another_drop_last_keeps_each_rank_on_its_shards(drop_last):
    old = _ranks(3, batch=2, drop_last=not drop_last)
    new = _ranks(3, batch=4, drop_last=drop_last)
    resumed = new[0].resume_after(0, world_size=3, batch_size=2, drop_last=not drop_last,
                                  consumed=3)
    for plan, before in zip(new, old, strict=True):
        plan.set_resumed(resumed)
        np.testing.assert_array_equal(plan.rank_indices(0)[:8], before.rank_indices(0)[6:14])


def test_elastic_resume_works_across_batch_sizes_not_world_sizes():
    old = _ranks(2, batch=3)
    new = _ranks(2, batch=5)
    resumed = new[0].resume_after(0, world_size=2, batch_size=3, drop_last=False, consumed=2)
    taken = np.concatenate([p.rank_indices(0)[:6] for p in old])
    for plan in new:
        plan.set_resumed(resumed)
    rest = np.concatenate([p.rank_indices(0) for p in new])
    assert set(taken.tolist()) | set(rest.tolist()) == set(range(N))
    assert not set(taken.tolist()) & set(rest.tolist())  # padding copies what is left
    assert len(set(rest.tolist())) == N - len(taken)
    for plan, before in zip(new, old, strict=True):  # each rank keeps its own shards
        np.testing.assert_array_equal(plan.rank_indices(0)[:10],
                                      before.rank_indices(0)[6:16])
    with pytest.raises(ValueError, match="order='shards', shard_window=2 lays each epoch "
                                         "out for one world size.*keep world_size"):
        _plan(world=3).resume_after(0, world_size=2, batch_size=3, drop_last=False,
                                    consumed=2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(shard_ids=SHARD_IDS, window=0), "shard_window must be an int >= 1, got 0"),
    (dict(shard_ids=SHARD_IDS, window=True), "shard_window must be an int >= 1"),
    (dict(shard_ids=np.array([0, -1]), window=2), "ints >= 0"),
    (dict(shard_ids=np.array([], np.int64), window=2), "non-empty")])
def test_bad_sampler_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ShardWindows(**kwargs)


def test_shard_ids_without_samples_do_not_count():
    sparse = ShardWindows(SHARD_IDS * 10, 2)  # the same shards, ids 0, 10, 20, ...
    np.testing.assert_array_equal(replace(_plan(), sampler=sparse).order(0), _plan().order(0))
    with pytest.raises(ValueError, match="shard_ids has 59 entries for 60 samples"):
        EpochPlan(N + 1, 4, sampler=sparse).order(0)


# --- make_loader over real shards -------------------------------------------------------

@pytest.fixture(scope="module")
def shards(image_folder, tmp_path_factory):
    """37 images in 8 shards of 5 (the last of 2), written by webdataset's ShardWriter."""
    return write_shards(image_folder, tmp_path_factory.mktemp("wds_order"), per_shard=5)


def _loader(data, backend="torch", **kw):
    kw = {"batch_size": 4, "size": 16, "seed": 3, "order": "shards", "shard_window": 2,
          **kw}
    if backend == "torch":
        kw["reference"] = {"num_workers": 0}
    return make_loader("image", data, backend=backend, **kw)


def _clones(loader, limit=None):
    out = []
    for batch in loader:
        out.append({k: v.clone() for k, v in batch.items()})
        if limit is not None and len(out) == limit:
            break
    return out


def test_both_backends_yield_the_same_shard_order_once(shards):
    got = {b: _clones(_loader(shards, b)) for b in ("dali", "torch")}
    order = [x["index"].tolist() for x in got["dali"]]
    assert order == [x["index"].tolist() for x in got["torch"]]
    flat = sum(order, [])
    assert sorted(flat) == list(range(37))
    shard_ids = _loader(shards)._engine.modality.source.shard_ids
    for batch in order:
        assert len(set(shard_ids[batch].tolist())) <= 4  # two windows of 2 shards at most
    global_order = [x["index"].tolist() for x in _clones(_loader(shards, order="global",
                                                                 shard_window=None))]
    assert global_order != order
    for a, b in zip(got["dali"], got["torch"], strict=True):
        assert (a["image"] - b["image"]).abs().mean() < 0.05


def test_several_shard_sources_are_shuffled_together(shards, image_folder, tmp_path):
    other = write_shards(image_folder, tmp_path / "other", per_shard=7)
    loader = _loader([shards, other])
    got = _clones(loader)
    flat = sum((b["index"].tolist() for b in got), [])
    assert sorted(flat) == list(range(74))
    source = loader._engine.modality.source
    assert len(source.shards) == 8 + 6
    assert {int(i) for b in got for i in b["source_id"]} == {0, 1}
    for batch in got:  # windows of 2 shards of either source
        assert len(set(source.shard_ids[batch["index"].numpy()].tolist())) <= 4


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_resume_mid_epoch_continues_exactly(shards, backend):
    full = _clones(_loader(shards, backend))
    first = _loader(shards, backend)
    _clones(first, limit=3)
    state = first.state_dict()
    assert state["order"]["order"] == "shards" and state["order"]["shard_window"] == 2
    again = _loader(shards, backend)
    again.load_state_dict(state)
    rest = _clones(again)
    assert len(rest) == len(full) - 3
    for a, b in zip(full[3:], rest, strict=True):
        assert torch.equal(a["index"], b["index"])
        torch.testing.assert_close(a["image"], b["image"])


def test_resume_under_another_batch_size_but_not_another_world_size(shards):
    two = [_loader(shards, rank=r, world_size=2) for r in range(2)]
    taken = [x["index"].tolist() for r in two for x in _clones(r, limit=2)]
    state = two[0].state_dict()
    bigger = [_loader(shards, rank=r, world_size=2, batch_size=6) for r in range(2)]
    rest = []
    for loader in bigger:
        loader.load_state_dict(state)
        rest += sum((x["index"].tolist() for x in _clones(loader)), [])
    assert set(sum(taken, [])) | set(rest) == set(range(37))
    assert not set(sum(taken, [])) & set(rest) and len(set(rest)) == 37 - 16
    assert len(rest) == 2 * -(-(37 - 16) // 2)  # 21 left, padded to even out 2 ranks
    one = _loader(shards, rank=0, world_size=1)
    with pytest.raises(ValueError, match="load_state_dict: order='shards'.*world size"):
        one.load_state_dict(state)


def test_a_state_of_another_order_or_window_is_refused(shards):
    state = _loader(shards).state_dict()
    with pytest.raises(ValueError, match="shard_window is 2 in the state but 3"):
        _loader(shards, shard_window=3).load_state_dict(state)
    with pytest.raises(ValueError, match="order is 'shards' in the state but None"):
        _loader(shards, order="global", shard_window=None).load_state_dict(state)


@pytest.mark.parametrize("kwargs,match", [
    (dict(order="random"), "order must be 'global' or 'shards', got 'random'"),
    (dict(order="global"), "shard_window=2 applies only with order='shards'"),
    (dict(shard_window=0), "shard_window must be an int >= 1, got 0"),
    (dict(sampling="class_balanced"), "order='shards' and sampling='class_balanced'"),
    (dict(sampling="repeated"), "order='shards' and sampling='repeated' cannot be"),
    (dict(min_per_source=1), "order='shards' and min_per_source cannot be combined"),
    (dict(shuffle=False), "order='shards' .* needs shuffle=True")])
def test_bad_order_options(shards, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _loader(shards, **kwargs)


def test_order_shards_needs_shards(image_folder):
    with pytest.raises(ValueError, match="order='shards' needs data in WebDataset tar "
                                         "shards.*ImageFolderSource"):
        _loader(image_folder)
    with pytest.raises(TypeError, match="shard_window"):
        _loader(image_folder, shard_window="4")
