import numpy as np
import pytest

from tests.torch_bridge.plan_batches import batches
from torch_bridge.order.plan import EpochPlan


def test_order_is_a_permutation_fixed_by_seed_and_epoch():
    plan = EpochPlan(100, 8, seed=3)
    a, b = plan.order(0), plan.order(0)
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == list(range(100))
    assert not np.array_equal(plan.order(0), plan.order(1))
    assert not np.array_equal(plan.order(0), EpochPlan(100, 8, seed=4).order(0))


def test_no_shuffle_is_identity():
    np.testing.assert_array_equal(EpochPlan(10, 3, shuffle=False).order(5), np.arange(10))


@pytest.mark.parametrize("n,batch,drop_last,expected", [
    (10, 3, False, 4), (10, 3, True, 3), (9, 3, True, 3), (1, 4, False, 1)])
def test_len_single_rank(n, batch, drop_last, expected):
    plan = EpochPlan(n, batch, drop_last=drop_last)
    assert len(plan) == expected
    assert sum(1 for _ in batches(plan, 0)) == expected


def test_one_rank_covers_every_index_once():
    plan = EpochPlan(37, 5, seed=1)
    seen = np.concatenate([b for _, b in batches(plan, 2)])
    assert sorted(seen.tolist()) == list(range(37))


@pytest.mark.parametrize("n,world,batch,drop_last", [
    (37, 3, 4, False), (37, 3, 4, True), (8, 4, 3, False), (5, 8, 2, False)])
def test_sharding_equal_lengths_disjoint_and_covering(n, world, batch, drop_last):
    plans = [EpochPlan(n, batch, seed=7, rank=r, world_size=world, drop_last=drop_last)
             for r in range(world)]
    assert len({len(p) for p in plans}) == 1
    shares = [p.rank_indices(0) for p in plans]
    assert len({len(s) for s in shares}) == 1
    flat = np.concatenate(shares)
    if drop_last:
        assert len(set(flat.tolist())) == len(flat) == (n // world) * world
    else:
        assert set(flat.tolist()) == set(range(n))
        assert len(flat) - n == (-n) % world  # only the padding repeats


def test_resume_offset_continues_the_same_batches():
    plan = EpochPlan(50, 6, seed=2)
    full = list(batches(plan, 3))
    rest = list(batches(plan, 3, start=4))
    assert [p for p, _ in rest] == list(range(4, len(plan)))
    for (_, a), (_, b) in zip(full[4:], rest, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plan.rank_indices(3)[30:36], full[5][1])


@pytest.mark.parametrize("kwargs", [dict(num_samples=0, batch_size=1),
                                    dict(num_samples=5, batch_size=0),
                                    dict(num_samples=5, batch_size=1, rank=2, world_size=2),
                                    dict(num_samples=1, batch_size=1, world_size=2,
                                         drop_last=True)])
def test_invalid_plans_raise(kwargs):
    with pytest.raises(ValueError):
        EpochPlan(**kwargs)


def test_start_out_of_range():
    with pytest.raises(ValueError, match="start batch"):
        list(batches(EpochPlan(10, 3), 0, start=9))


def _draws_by_loop(order):
    seen, out = {}, []
    for value in order.tolist():
        out.append(seen.get(value, 0))
        seen[value] = seen.get(value, 0) + 1
    return np.array(out)


@pytest.mark.parametrize("seed", range(5))
def test_draw_counts_match_a_loop(seed):
    from torch_bridge.order.plan import draw_counts
    order = np.random.default_rng(seed).integers(0, 7, size=40)
    assert np.array_equal(draw_counts(order), _draws_by_loop(order))
    assert draw_counts(np.array([], np.int64)).shape == (0,)


def test_first_draws_are_keyed_by_their_index():
    plan = EpochPlan(10, 3, seed=4)
    for _, indices, keys in plan.keyed_batches(2):
        assert np.array_equal(indices, keys)


@pytest.mark.parametrize("n,world", [(7, 2), (5, 4), (10, 3)])
def test_padded_repeats_get_keys_of_their_own(n, world):
    """The wrap-around padding repeats indices; every draw of the epoch has its own key,
    key % n is the index and the first draw keeps the index itself."""
    plans = [EpochPlan(n, 2, seed=1, rank=r, world_size=world) for r in range(world)]
    keys = np.concatenate([p.rank_keys(3) for p in plans])
    indices = np.concatenate([p.rank_indices(3) for p in plans])
    assert len(set(keys.tolist())) == len(keys)
    assert np.array_equal(keys % n, indices)
    assert sorted(keys[keys < n].tolist()) == list(range(n))
    for p in plans:  # keyed_batches slices the same arrays
        got = [k for _, _, batch_keys in p.keyed_batches(3) for k in batch_keys.tolist()]
        assert got == p.rank_keys(3).tolist()


# Elastic resume ---------------------------------------------------------------------------
# Old ranks (world, batch, drop_last) each consumed `c` batches; the state moves to a new
# layout. The expectation is built from the old plans' own per-rank output: position t of
# rank r is position r + world * t of the epoch's padded global order, whose first
# len(order) entries are the epoch's samples (the rest is padding).
from collections import Counter  # noqa: E402

from torch_bridge.order.plan import ResumedEpoch, remaining_span  # noqa: E402
from torch_bridge.order.sampling import ClassBalanced, SourceAware  # noqa: E402


def _plans(n, world, batch, drop_last=False, sampler=None, seed=5):
    return [EpochPlan(n, batch, seed=seed, rank=r, world_size=world, drop_last=drop_last,
                      sampler=sampler) for r in range(world)]


def _old_remaining(plans, epoch, consumed):
    """(pairs the old ranks yielded, pairs of the epoch's samples they had not yielded)."""
    world, batch = plans[0].world_size, plans[0].batch_size
    entries = len(plans[0].order(epoch))
    taken, left = [], []
    for r, plan in enumerate(plans):
        for position, indices, keys in plan.keyed_batches(epoch):
            for t, pair in enumerate(zip(indices.tolist(), keys.tolist(), strict=True),
                                     position * batch):
                if position < consumed:
                    taken.append(pair)
                elif r + world * t < entries:  # not padding
                    left.append(pair)
    return taken, left


def _resume(old, new, epoch, consumed, span=None):
    """New plans given what the old ones left; [(index, key) per new rank]."""
    resumed = new[0].resume_after(epoch, world_size=old[0].world_size,
                                  batch_size=old[0].batch_size, drop_last=old[0].drop_last,
                                  consumed=consumed, span=span)
    for plan in new:
        plan.set_resumed(resumed)
    return resumed, [[pair for _, indices, keys in plan.keyed_batches(epoch)
                      for pair in zip(indices.tolist(), keys.tolist(), strict=True)]
                     for plan in new]


@pytest.mark.parametrize("old, new, consumed", [
    ((2, 4), (1, 4), 2), ((1, 4), (2, 4), 3), ((2, 4), (3, 4), 1), ((3, 2), (2, 5), 2),
    ((2, 3), (3, 1), 4), ((1, 5), (4, 2), 1), ((2, 4), (3, 4), 0), ((2, 4), (5, 3), 5)])
@pytest.mark.parametrize("sampler", [None, "class_balanced"])
def test_elastic_resume_yields_every_remaining_sample_once_plus_padding(old, new, consumed,
                                                                        sampler):
    n, epoch = 37, 2
    balanced = ClassBalanced(np.arange(n) % 3) if sampler else None
    old_plans, new_plans = _plans(n, *old, sampler=balanced), _plans(n, *new, sampler=balanced)
    taken, left = _old_remaining(old_plans, epoch, consumed)
    resumed, per_rank = _resume(old_plans, new_plans, epoch, consumed)
    assert len({len(p) for p in per_rank}) == 1  # every new rank the same length ...
    assert len({p.num_batches(epoch) for p in new_plans}) == 1  # ... and batch count
    got = Counter(pair for rank in per_rank for pair in rank)
    assert not Counter(left) - got  # nothing lost, each keeping its augmentation key
    padding = got - Counter(left)
    assert sum(padding.values()) == (-len(left)) % new[0]  # only the padding repeats
    used = {key for _, key in taken + left}
    assert all(i in dict(left) and key % n == i and key not in used for i, key in padding)
    if sampler is None:  # a permutation: the epoch's samples, each exactly once
        assert sorted(i for i, k in taken + list(got) if k < n) == list(range(n))
    assert (resumed.epoch, resumed.stop - resumed.start) == (epoch, len(left))


@pytest.mark.parametrize("old_drop, new_drop", [(True, False), (False, True), (True, True)])
def test_elastic_resume_with_drop_last(old_drop, new_drop):
    """drop_last: what the old ranks would never have yielded is not carried over; a
    drop_last loader drops what does not fill a batch on every new rank, pads nothing."""
    n, epoch, consumed = 41, 1, 2
    old_plans, new_plans = _plans(n, 2, 4, old_drop), _plans(n, 3, 3, new_drop)
    taken, left = _old_remaining(old_plans, epoch, consumed)
    if old_drop:
        left = left[:2 * len(old_plans[0]) * 4 - len(taken)]  # the old drop_last epoch
    _, per_rank = _resume(old_plans, new_plans, epoch, consumed)
    got = Counter(pair for rank in per_rank for pair in rank)
    assert len({len(p) for p in per_rank}) == 1
    if new_drop:
        assert not got - Counter(left)  # no padding, nothing twice
        per_rank_full = (len(left) // 3) // 3 * 3
        assert sum(got.values()) == 3 * per_rank_full
        order = np.concatenate([np.array(r).reshape(-1, 3, 2) for r in per_rank], axis=1)
        kept = [tuple(p) for p in order.reshape(-1, 2)]  # global order: (batch, rank)
        assert Counter(kept) == got
    else:
        assert not Counter(left) - got
        assert sum((got - Counter(left)).values()) == (-len(left)) % 3


def test_a_second_elastic_resume_in_the_same_epoch_still_covers_it():
    """2 ranks -> 3 ranks after 2 batches, 3 -> 1 after 1 more: one span of the order."""
    n, epoch = 29, 0
    first = _plans(n, 2, 3)
    taken, _ = _old_remaining(first, epoch, 2)
    middle = _plans(n, 3, 2)
    resumed, per_rank = _resume(first, middle, epoch, 2)
    taken += [pair for rank in per_rank for pair in rank[:2]]  # each took 1 batch of 2
    last = _plans(n, 1, 4)
    again, rest = _resume(middle, last, epoch, 1, span=(resumed.start, resumed.stop))
    assert (again.start, again.stop) == (resumed.start + 6, n)
    assert sorted(i for i, k in taken + rest[0] if k < n) == list(range(n))
    assert len(rest[0]) == n - 12 - 6


def test_the_same_layout_continues_inside_a_resumed_span():
    n, epoch = 23, 4
    new = _plans(n, 3, 2)
    resumed, full = _resume(_plans(n, 2, 4), new, epoch, 1)
    for plan, pairs in zip(new, full, strict=True):
        tail = [pair for _, indices, keys in plan.keyed_batches(epoch, 2)
                for pair in zip(indices.tolist(), keys.tolist(), strict=True)]
        assert tail == pairs[4:]


def test_later_epochs_and_other_plans_are_fresh():
    n = 19
    new = _plans(n, 3, 2)
    _resume(_plans(n, 2, 4), new, 3, 1)
    for plan, fresh in zip(new, _plans(n, 3, 2), strict=True):
        assert len(plan) == len(fresh) != plan.num_batches(3)
        for epoch in (2, 4):
            assert plan.num_batches(epoch) == len(fresh)
            for a, b in zip(plan.keyed_batches(epoch), fresh.keyed_batches(epoch), strict=True):
                assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
        plan.set_resumed(None)
        assert plan.num_batches(3) == len(fresh)


def test_a_finished_epoch_leaves_nothing():
    old = _plans(10, 2, 2)
    resumed, per_rank = _resume(old, _plans(10, 3, 2), 0, len(old[0]))
    assert resumed.start == resumed.stop and per_rank == [[], [], []]
    assert list(_plans(10, 3, 2)[0].keyed_batches(0, 0)) != []  # a fresh plan has some


def test_source_aware_orders_refuse_a_new_layout_mid_epoch():
    plan = EpochPlan(12, 4, seed=1, sampler=SourceAware(np.arange(12) % 2, 1, 4))
    with pytest.raises(ValueError, match="min_per_source=1 lays each epoch out"):
        plan.resume_after(0, world_size=2, batch_size=4, drop_last=False, consumed=1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(consumed=4), "batches_consumed 4 out of range for the 3 batches"),
    (dict(consumed=-1), "batches_consumed -1")])
def test_remaining_span_checks_the_position(kwargs, match):
    with pytest.raises(ValueError, match=match):
        remaining_span(0, 10, world_size=2, batch_size=2, drop_last=False, **kwargs)
    with pytest.raises(ValueError, match="start <= stop"):
        ResumedEpoch(0, 5, 3)
    with pytest.raises(ValueError, match="exceeds the 10 entries"):
        EpochPlan(10, 2).set_resumed(ResumedEpoch(0, 0, 11))
