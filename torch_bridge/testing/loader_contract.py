"""The loader contract (docs/api.md) as one test class, subclassed once per modality kind.

A subclass (named `Test...`, so pytest collects it) sets `kind` (a key of
`torch_bridge.registry.KINDS`: its tiny data set and small batch options come from there,
`tiny.tiny_data_set`), `sample_shape` (the main graph field's per-sample shape under those
options), `main` and `tolerance` (how close the two backends' main field must be, in its own
units: decoders and resizers differ, while a wrong crop or a missed flip is far off) and
implements `break_samples`. It inherits, on both backends (the `backend` fixture): the
schema, one pass yielding every index once, drop_last, reshuffling per epoch, agreement of
the backends on order and augmentation, exact resume (mid-epoch with every sampler, at and
across an epoch boundary, into a loader with workers, on each rank of two), sharding,
multiple sources and on_error. A subclass over other data of the same kind (shards, a store)
overrides the `tiny` fixture and names its own `runs_key`.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from torch_bridge import SampleError, registry
from torch_bridge.testing.tiny import BACKENDS, tiny_data_set

EPOCHS = 3
_runs: dict = {}  # (kind, backend, scenario) -> batches of epochs 0..EPOCHS-1


def copies(batches) -> list[dict]:
    """Batches cloned out of the backend's buffers."""
    return [{name: value.clone() for name, value in b.items()} for b in batches]


def indices(batches) -> list[list[int]]:
    return [b["index"].tolist() for b in batches]


def assert_same(got, want) -> None:
    """Same batches: indices, fields, dtypes and values, exactly."""
    assert indices(got) == indices(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for name in w:
            assert g[name].dtype == w[name].dtype, name
            assert torch.equal(g[name], w[name]), name


def _scenario(tiny, scenario: str) -> dict:
    """make_loader arguments of a sampling scenario on the tiny data."""
    if scenario == "uniform":
        return {}
    if scenario == "class_balanced":
        return {"sampling": "class_balanced"}
    per_source = tiny.options["batch_size"] // 4 or 1  # 1 of 2 (clips), 4 of 16 (patches)
    return {"data": tiny.two, "min_per_source": per_source}


class LoaderContract:
    kind: str = ""
    sample_shape: tuple[int, ...] = ()
    main: str = ""
    tolerance: float = 0.0
    exact: tuple[str, ...] = ("index", "label")  # fields the backends return identically
    # the key uninterrupted runs are cached under (None: `kind`); a subclass over another
    # data set of the same kind (shards, a store) names its own
    runs_key: str | None = None

    def break_samples(self, root: Path, modality) -> tuple[set[int], str, str]:
        """Make samples of the copy at `root` unreadable (`modality`: a loader's, already
        built on it); return their indices, a regex matching their path and one matching
        the reason (the cause's message)."""
        raise NotImplementedError

    # fixtures ---------------------------------------------------------------------------
    @pytest.fixture(params=BACKENDS)
    def backend(self, request) -> str:
        """Each backend of make_loader in turn."""
        return request.param

    @pytest.fixture
    def tiny(self, tmp_path_factory):
        """The kind's tiny data set (`tiny.TinyData`), written once per session."""
        return tiny_data_set(tmp_path_factory, self.kind)

    def _make(self, tiny, backend, scenario="uniform", **overrides):
        return tiny.loader(backend, **{"seed": 7, **_scenario(tiny, scenario), **overrides})

    def _uninterrupted(self, tiny, backend, scenario="uniform"):
        key = (self.runs_key or self.kind, backend, scenario)
        if key not in _runs:
            loader = self._make(tiny, backend, scenario)
            _runs[key] = [copies(loader) for _ in range(EPOCHS)]
            loader.close()
        return _runs[key]

    # schema and coverage ----------------------------------------------------------------
    def test_schema(self, tiny, backend):
        loader = tiny.loader(backend)
        batch = next(iter(loader))
        schema = registry.get(tiny.modality).schema()
        assert set(batch) == set(schema)
        for name, (dtype, layout) in schema.items():
            assert batch[name].dtype == getattr(torch, dtype), name
            assert batch[name].dim() == len(layout), name
            assert batch[name].device.type == "cpu"
        assert batch[self.main].shape == (tiny.options["batch_size"], *self.sample_shape)
        labels = loader._engine.modality.source.labels
        assert batch["label"].tolist() == labels[batch["index"].numpy()].tolist()

    def _count(self, tiny, data=None) -> int:
        """Samples in the tiny data set (or in `data`), from the registry's modality."""
        return len(registry.get(tiny.modality).create(
            tiny.one if data is None else data, seed=0, device="cpu", options={}))

    def test_one_pass_yields_every_index_once(self, tiny, backend):
        loader = tiny.loader(backend)
        n, size = self._count(tiny), tiny.options["batch_size"]
        seen = [i for b in indices(loader) for i in b]
        assert len(loader) == -(-n // size) and sorted(seen) == list(range(n))

    def test_drop_last(self, tiny, backend):
        loader = tiny.loader(backend, drop_last=True)
        n, size = self._count(tiny), tiny.options["batch_size"]
        assert len(loader) == n // size
        assert [len(b) for b in indices(loader)] == [size] * (n // size)

    def test_epochs_reshuffle_and_seed_fixes_order(self, tiny, backend):
        full = self._uninterrupted(tiny, backend)
        assert indices(full[0]) != indices(full[1])
        loader = self._make(tiny, backend)
        loader.set_epoch(1)
        assert indices(loader) == indices(full[1])
        assert indices(self._make(tiny, backend, seed=8)) != indices(full[0])

    def test_backends_agree_on_order_and_augmentation(self, tiny):
        dali, ref = (self._uninterrupted(tiny, b)[0] for b in ("dali", "torch"))
        assert len(dali) == len(ref)
        for a, b in zip(dali, ref, strict=True):
            for name in self.exact:
                assert torch.equal(a[name], b[name]), name
            diff = (a[self.main].double() - b[self.main].double()).abs().mean().item()
            assert diff <= self.tolerance, diff

    def test_shards_equal_length_disjoint_covering(self, tiny, backend):
        shards = [indices(tiny.loader(backend, rank=r, world_size=3)) for r in range(3)]
        n = self._count(tiny)
        assert len({len(s) for s in shards}) == 1
        flat = [i for s in shards for b in s for i in b]
        assert set(flat) == set(range(n)) and len(flat) == 3 * -(-n // 3)  # padded evenly

    def test_multi_source_batches_hold_source_id(self, tiny, backend):
        loader = tiny.loader(backend, data=tiny.two, shuffle=False)
        sizes = [self._count(tiny, d) for d in tiny.two]
        batches = list(loader)
        assert set(batches[0]) == set(registry.get(tiny.modality).schema(multi_source=True))
        ids = torch.cat([b["source_id"] for b in batches]).tolist()
        assert ids == [0] * sizes[0] + [1] * sizes[1]

    # resume -----------------------------------------------------------------------------
    def _resumed(self, tiny, backend, scenario, state, **overrides):
        loader = self._make(tiny, backend, scenario, **overrides)
        loader.load_state_dict(state)
        mine = loader.state_dict()
        assert (mine["epoch"], mine["batches_consumed"]) == \
            (state["epoch"], state["batches_consumed"])
        return loader

    @pytest.mark.parametrize("scenario", ["uniform", "class_balanced", "min_per_source"])
    def test_resume_mid_epoch(self, tiny, backend, scenario):
        full = self._uninterrupted(tiny, backend, scenario)
        assert len(full[0]) >= 3 and indices(full[0]) != indices(full[1])
        loader = self._make(tiny, backend, scenario)
        it = iter(loader)
        head = copies([next(it)])
        state = loader.state_dict()
        assert (state["epoch"], state["batches_consumed"]) == (0, 1)
        resumed = self._resumed(tiny, backend, scenario, state)
        assert_same(copies(resumed), full[0][1:])
        assert_same(copies(resumed), full[1])  # and the next epoch as usual
        assert resumed.state_dict()["epoch"] == 2
        assert_same(head + copies(it), full[0])  # saving did not disturb the loader
        loader.close(), resumed.close()

    def test_resume_across_an_epoch_boundary(self, tiny, backend):
        full = self._uninterrupted(tiny, backend)
        loader = self._make(tiny, backend)
        assert_same(copies(loader), full[0])
        at_boundary = loader.state_dict()
        assert (at_boundary["epoch"], at_boundary["batches_consumed"]) == (1, 0)
        it = iter(loader)
        assert_same(copies([next(it), next(it)]), full[1][:2])
        mid_next = loader.state_dict()
        assert (mid_next["epoch"], mid_next["batches_consumed"]) == (1, 2)
        resumed = self._resumed(tiny, backend, "uniform", at_boundary)
        assert_same(copies(resumed), full[1])
        assert_same(copies(resumed), full[2])
        resumed = self._resumed(tiny, backend, "uniform", mid_next)
        resumed.set_epoch(1)  # a resumed loop calls set_epoch as usual: the position is kept
        assert_same(copies(resumed), full[1][2:])
        assert_same(copies(resumed), full[2])
        loader.close(), resumed.close()

    def test_resume_after_the_last_batch_was_taken_but_not_the_end(self, tiny, backend):
        """next() took every batch but the pass has not seen StopIteration: the state is at
        the end of epoch 0 and the resumed loader goes on with epoch 1."""
        full = self._uninterrupted(tiny, backend)
        loader = self._make(tiny, backend)
        it = iter(loader)
        for _ in range(len(loader)):
            next(it)
        state = loader.state_dict()
        assert (state["epoch"], state["batches_consumed"]) == (0, len(loader))
        resumed = self._resumed(tiny, backend, "uniform", state)
        assert copies(resumed) == []
        assert_same(copies(resumed), full[1])
        loader.close(), resumed.close()

    def test_torch_resume_into_a_loader_with_workers(self, tiny):
        """Workers change where samples are decoded, not what they hold."""
        full = self._uninterrupted(tiny, "torch")
        loader = self._make(tiny, "torch")
        next(iter(loader))
        resumed = self._resumed(tiny, "torch", "uniform", loader.state_dict(),
                                reference={"num_workers": 1})
        assert_same(copies(resumed), full[0][1:])
        resumed.close()

    def test_resume_on_another_rank_of_two(self, tiny, backend):
        """Each rank's state resumes its own shard."""
        for rank in (0, 1):
            full = copies(self._make(tiny, backend, rank=rank, world_size=2))
            loader = self._make(tiny, backend, rank=rank, world_size=2)
            next(iter(loader))
            state = loader.state_dict()
            assert state["rank"] == rank
            resumed = self._resumed(tiny, backend, "uniform", state, rank=rank, world_size=2)
            assert_same(copies(resumed), full[1:])

    def test_state_from_another_data_set_is_refused(self, tiny, backend):
        state = tiny.loader(backend).state_dict()
        with pytest.raises(ValueError, match="num_samples"):
            tiny.loader(backend, data=tiny.two[1]).load_state_dict(state)

    # on_error ---------------------------------------------------------------------------
    def _broken(self, tiny, backend, tmp_path, on_error):
        root = shutil.copytree(tiny.one, tmp_path / "data")
        loader = tiny.loader(backend, data=root, on_error=on_error, shuffle=False)
        return (loader, *self.break_samples(root, loader._engine.modality))

    def test_on_error_raise_names_file_and_index(self, tiny, backend, tmp_path):
        loader, bad, path, reason = self._broken(tiny, backend, tmp_path, "raise")
        with pytest.raises(SampleError, match=rf"sample {min(bad)} \(.*{path}\).*{reason}"):
            list(loader)

    def test_on_error_skip_keeps_every_other_index(self, tiny, backend, tmp_path):
        loader, bad, path, reason = self._broken(tiny, backend, tmp_path, "skip")
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == sorted(set(range(self._count(tiny))) - bad)
        assert sorted(s.index for s in loader.skipped) == sorted(bad)
        assert all(re.search(path, s.path) and re.search(reason, s.reason)
                   for s in loader.skipped)


def truncate(path, keep: int = 40) -> None:
    """Cut a file to its first `keep` bytes."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:keep])


def garbage_jpegs(folder) -> None:
    """Overwrite every JPEG in `folder` with bytes no decoder takes."""
    for jpg in Path(folder).glob("*.jpg"):
        jpg.write_bytes(b"\xff\xd8garbage" * 8)


__all__ = ["LoaderContract", "assert_same", "copies", "garbage_jpegs", "indices", "truncate"]
