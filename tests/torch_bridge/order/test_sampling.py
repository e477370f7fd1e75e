"""Class-balanced and source-aware sampling: composition statistics, determinism, sharding,
resume through make_loader, and errors naming the option."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import write_image_folder
from tests.torch_bridge.plan_batches import batches
from torch_bridge import make_loader
from torch_bridge.order.plan import EpochPlan
from torch_bridge.order.sampling import ClassBalanced, SourceAware

IMBALANCED = np.array([0] * 200 + [1] * 20, dtype=np.int64)  # 10:1
SOURCES = np.array([0] * 90 + [1] * 7 + [2] * 3, dtype=np.int64)


def _class_plan(seed=0, **kw):
    return EpochPlan(len(IMBALANCED), 16, seed=seed, sampler=ClassBalanced(IMBALANCED), **kw)


def _source_plan(min_per_source=2, batch_size=8, **kw):
    return EpochPlan(len(SOURCES), batch_size, seed=kw.pop("seed", 4),
                     sampler=SourceAware(SOURCES, min_per_source, batch_size), **kw)


def _counts(batch, ids, n):
    return np.bincount(ids[batch], minlength=n)


# --- class-balanced --------------------------------------------------------------------

def test_class_balanced_frequencies_are_uniform_over_epochs():
    plan = _class_plan(seed=1)
    drawn = np.concatenate([plan.order(e) for e in range(100)])
    freq = np.bincount(IMBALANCED[drawn], minlength=2) / len(drawn)
    # 22,000 draws: the standard error of a frequency is about 0.0034; plain shuffling
    # would give 0.91 / 0.09.
    np.testing.assert_allclose(freq, [0.5, 0.5], atol=0.02)
    assert len(drawn) == 100 * len(IMBALANCED)


def test_class_balanced_batches_are_balanced_on_average():
    plan = _class_plan(seed=2)
    per_batch = np.array([_counts(b, IMBALANCED, 2) for e in range(20)
                          for _, b in batches(plan, e) if len(b) == 16])
    np.testing.assert_allclose(per_batch.mean(axis=0), [8, 8], atol=0.5)


def test_class_balanced_weights_are_inverse_class_frequency():
    weights = ClassBalanced(IMBALANCED).weights()
    assert weights.sum() == pytest.approx(1.0)
    assert weights[0] == pytest.approx(0.5 / 200) and weights[-1] == pytest.approx(0.5 / 20)


def test_class_balanced_is_deterministic_and_changes_across_epochs_and_seeds():
    a, b = _class_plan(seed=3), _class_plan(seed=3)
    np.testing.assert_array_equal(a.order(5), b.order(5))
    assert not np.array_equal(a.order(5), a.order(6))
    assert not np.array_equal(a.order(5), _class_plan(seed=4).order(5))
    assert not np.array_equal(a.order(5), EpochPlan(220, 16, seed=3).order(5))


def test_class_balanced_samples_with_replacement():
    order = _class_plan().order(0)
    assert len(order) == len(IMBALANCED) and len(np.unique(order)) < len(order)
    assert order.dtype == np.int64 and order.min() >= 0 and order.max() < len(IMBALANCED)


def test_class_balanced_shards_equal_length_and_resume():
    plans = [_class_plan(seed=5, rank=r, world_size=3) for r in range(3)]
    assert len({len(p) for p in plans}) == 1
    full = list(batches(plans[1], 2))
    rest = list(batches(plans[1], 2, start=3))
    for (_, x), (_, y) in zip(full[3:], rest, strict=True):
        np.testing.assert_array_equal(x, y)


# --- source-aware ----------------------------------------------------------------------

@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("min_per_source", [1, 2])
def test_every_batch_on_every_rank_holds_each_source(world, drop_last, min_per_source):
    for rank in range(world):
        plan = _source_plan(min_per_source, rank=rank, world_size=world, drop_last=drop_last)
        got = [b for _, b in batches(plan, 0)]
        assert len(got) == len(plan)
        for batch in got:
            quota = min(min_per_source, len(batch) // 3)  # the last batch may be shorter
            assert _counts(batch, SOURCES, 3).min() >= quota, (rank, batch)
        if drop_last:
            assert all(len(b) == 8 for b in got)


def test_source_aware_full_batches_hold_the_quota_on_two_ranks():
    for rank in range(2):
        plan = _source_plan(2, batch_size=12, rank=rank, world_size=2, seed=9)
        full = [b for _, b in batches(plan, 1) if len(b) == 12]
        assert full and all(_counts(b, SOURCES, 3).min() >= 2 for b in full)


def test_source_aware_shards_have_equal_lengths_and_share_one_order():
    plans = [_source_plan(rank=r, world_size=2) for r in range(2)]
    assert len(plans[0]) == len(plans[1])
    order = plans[0].order(0)
    np.testing.assert_array_equal(order, plans[1].order(0))
    for rank, plan in enumerate(plans):
        np.testing.assert_array_equal(plan.rank_indices(0), order[rank::2])


def test_source_aware_uses_the_large_source_once_and_repeats_the_small():
    order = _source_plan(1).order(0)
    assert len(order) == 100
    big = order[SOURCES[order] == 0]
    assert len(np.unique(big)) == len(big)  # the large source is not oversampled
    assert (SOURCES[order] == 2).sum() >= len(order) // 8  # 3 samples fill >= 13 quotas


def test_source_aware_with_loose_quota_is_a_permutation():
    balanced = np.repeat([0, 1], 50)
    plan = EpochPlan(100, 10, seed=1, sampler=SourceAware(balanced, 1, 10))
    assert sorted(plan.order(3).tolist()) == list(range(100))


def test_source_aware_is_deterministic_and_changes_across_epochs():
    a, b = _source_plan(seed=7), _source_plan(seed=7)
    np.testing.assert_array_equal(a.order(2), b.order(2))
    assert not np.array_equal(a.order(2), a.order(3))
    assert not np.array_equal(a.order(2), _source_plan(seed=8).order(2))


@pytest.mark.parametrize("kwargs,match", [
    (dict(min_per_source=3, batch_size=8), "min_per_source=3 with 3 sources needs 9"),
    (dict(min_per_source=0, batch_size=8), "min_per_source must be a positive int"),
    (dict(min_per_source=1.5, batch_size=8), "min_per_source must be a positive int")])
def test_source_aware_invalid_quota(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SourceAware(SOURCES, **kwargs)


def test_sampler_requires_shuffle_and_matching_lengths():
    with pytest.raises(ValueError, match="shuffle"):
        EpochPlan(220, 8, shuffle=False, sampler=ClassBalanced(IMBALANCED))
    with pytest.raises(ValueError, match="labels has 220 entries for 10 samples"):
        EpochPlan(10, 8, sampler=ClassBalanced(IMBALANCED)).order(0)
    with pytest.raises(ValueError, match="labels must be"):
        ClassBalanced(np.zeros(0, dtype=np.int64))


def test_default_plan_is_unchanged_by_the_sampler_field():
    plan = EpochPlan(100, 8, seed=3)
    expected = np.random.default_rng([3, 0]).permutation(100)
    np.testing.assert_array_equal(plan.order(0), expected)


# --- through make_loader ---------------------------------------------------------------

@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    big = write_image_folder(root / "big", n_images=14, n_classes=2)
    small = write_image_folder(root / "small", n_images=3, n_classes=2, seed=5)
    return [big, small]


def _loader(data, backend="torch", **kw):
    kw = {"batch_size": 4, "size": 16, "seed": 1, **kw}
    if backend == "torch":
        kw["reference"] = {"num_workers": 0}
    return make_loader("image", data, backend=backend, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_loader_source_aware_batches_and_resume(two_sources, backend):
    reference = _loader(two_sources, backend, min_per_source=1)
    reference.set_epoch(2)
    full = list(reference)
    assert len(full) == len(reference) == 5
    for batch in full[:-1]:
        assert set(batch["source_id"].tolist()) == {0, 1}
    loader = _loader(two_sources, backend, min_per_source=1)
    loader.set_epoch(2)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    assert state["order"]["min_per_source"] == 1
    resumed = _loader(two_sources, backend, min_per_source=1)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)
    rest = list(resumed)
    assert len(rest) == len(full) - 2
    for a, b in zip(full[2:], rest, strict=True):
        assert torch.equal(a["index"], b["index"])
        torch.testing.assert_close(a["image"], b["image"])


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_loader_class_balanced_is_deterministic_and_resumable(two_sources, backend):
    def indices(loader):
        return [b["index"].tolist() for b in loader]

    first = indices(_loader(two_sources, backend, sampling="class_balanced"))
    assert first == indices(_loader(two_sources, "torch", sampling="class_balanced"))
    assert first != indices(_loader(two_sources, backend))
    flat = [i for batch in first for i in batch]
    assert len(flat) == 17 and len(set(flat)) < 17  # drawn with replacement
    loader = _loader(two_sources, backend, sampling="class_balanced")
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    assert state["order"]["sampling"] == "class_balanced"
    resumed = _loader(two_sources, backend, sampling="class_balanced")
    resumed.load_state_dict(state)
    assert indices(resumed) == first[1:]


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_loader_class_balanced_redraws_get_their_own_augmentation(two_sources, backend):
    """A sample drawn twice in an epoch (with replacement) is cropped anew, and both
    backends crop each draw the same way."""
    def draws(loader):
        out = {}
        for batch in loader:
            for index, image in zip(batch["index"].tolist(), batch["image"], strict=True):
                out.setdefault(index, []).append(image)
        return out

    got = draws(_loader(two_sources, backend, sampling="class_balanced", size=32))
    twice = {i: images for i, images in got.items() if len(images) > 1}
    assert twice, "class-balanced sampling drew no sample twice"
    for images in twice.values():
        assert not torch.equal(images[0], images[1])
    other = draws(_loader(two_sources, "dali" if backend == "torch" else "torch",
                          sampling="class_balanced", size=32))
    for index, images in twice.items():
        for mine, theirs in zip(images, other[index], strict=True):
            assert (mine - theirs).abs().mean() < 0.05


def test_loader_refuses_state_saved_with_other_sampling(two_sources):
    state = _loader(two_sources, sampling="class_balanced").state_dict()
    with pytest.raises(ValueError, match="fingerprint differs"):
        _loader(two_sources).load_state_dict(state)
    state = _loader(two_sources).state_dict()
    with pytest.raises(ValueError, match="sampling is None in the state"):
        _loader(two_sources, sampling="class_balanced").load_state_dict(state)
    state = _loader(two_sources, min_per_source=1).state_dict()
    with pytest.raises(ValueError, match="min_per_source is 1 in the state but 2"):
        _loader(two_sources, min_per_source=2).load_state_dict(state)


def test_loader_uniform_fingerprint_has_no_sampling_keys(two_sources):
    order = _loader(two_sources).state_dict()["order"]
    assert "sampling" not in order and "min_per_source" not in order


@pytest.mark.parametrize("kwargs,match", [
    (dict(sampling="balanced"), "sampling must be 'uniform' or 'class_balanced'"),
    (dict(min_per_source=3), "min_per_source=3 with 2 sources needs 6 .* batch_size is 4"),
    (dict(min_per_source=1, shuffle=False), "min_per_source .* shuffle=True"),
    (dict(sampling="class_balanced", shuffle=False), "sampling='class_balanced' .* shuffle"),
    (dict(sampling="class_balanced", min_per_source=1), "cannot be combined")])
def test_loader_bad_sampling_options(two_sources, kwargs, match):
    with pytest.raises(ValueError, match=match):
        _loader(two_sources, **kwargs)


def test_loader_min_per_source_needs_a_list_of_folders(two_sources):
    with pytest.raises(ValueError, match="min_per_source needs `data` as a list"):
        _loader(two_sources[0], min_per_source=1)
