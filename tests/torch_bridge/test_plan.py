import numpy as np
import pytest

from torch_bridge.plan import EpochPlan


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
    assert sum(1 for _ in plan.batches(0)) == expected


def test_one_rank_covers_every_index_once():
    plan = EpochPlan(37, 5, seed=1)
    seen = np.concatenate([b for _, b in plan.batches(2)])
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
    full = list(plan.batches(3))
    rest = list(plan.batches(3, start=4))
    assert [p for p, _ in rest] == list(range(4, len(plan)))
    for (_, a), (_, b) in zip(full[4:], rest):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plan.batch(3, 5), full[5][1])


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
        list(EpochPlan(10, 3).batches(0, start=9))


def _draws_by_loop(order):
    seen, out = {}, []
    for value in order.tolist():
        out.append(seen.get(value, 0))
        seen[value] = seen.get(value, 0) + 1
    return np.array(out)


@pytest.mark.parametrize("seed", range(5))
def test_draw_counts_match_a_loop(seed):
    from torch_bridge.plan import draw_counts
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
