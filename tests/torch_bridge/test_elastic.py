"""Elastic resume: a state saved under one world size and batch size loads under another.

In one process (ranks simulated with rank=/world_size=), both backends: rank 0 of a 2-rank
setup saves its state after a few batches; 1 rank and 3 ranks (other batch sizes) load it;
what the old ranks yielded plus what the new ranks yield is every sample of the epoch once,
plus the padding, each remaining sample with the crop the old ranks would have given it.
Then under torchrun (2 CPU processes, gloo; tests/torch_bridge/elastic_worker.py) for every
modality: 2 ranks -> 1 rank and 1 rank -> 2 ranks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from tests.conftest import BACKENDS, MODALITY_KINDS, write_image_folder
from torch_bridge import make_loader

EPOCH, N, STOP = 2, 13, 2  # the epoch resumed, samples, batches the old ranks took


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_image_folder(tmp_path_factory.mktemp("elastic") / "data", n_images=N,
                              n_classes=3)


def _loader(folder, backend, *, rank, world_size, batch_size, **overrides):
    options = dict(backend=backend, batch_size=batch_size, size=16, seed=3, rank=rank,
                   world_size=world_size)
    if backend == "torch":  # workers add seconds per loader and change nothing here
        options["reference"] = {"num_workers": 0}
    return make_loader("image", folder, **options, **overrides)


def _samples(loader, limit=None):
    """[(index, image)] of a pass, stopping after `limit` batches."""
    out = []
    for count, batch in enumerate(loader):
        out += zip(batch["index"].tolist(), batch["image"].clone(), strict=True)
        if count + 1 == limit:
            break
    return out


def _old_ranks(folder, backend):
    """The 2-rank setup (batches of 2): (first draw of each index in a whole pass of EPOCH,
    samples taken in its first STOP batches by both ranks, the state rank 0 then saved)."""
    first, taken, states = {}, [], []
    for rank in (0, 1):
        loader = _loader(folder, backend, rank=rank, world_size=2, batch_size=2)
        loader.set_epoch(EPOCH)
        for t, (index, image) in enumerate(_samples(loader)):
            if rank + 2 * t < N:  # not the padding (global position rank + world * t)
                first[index] = image
        loader.set_epoch(EPOCH)
        taken += _samples(loader, STOP)
        states.append(loader.state_dict())
        loader.close()
    assert {k: v for k, v in states[0].items() if k != "rank"} == \
        {k: v for k, v in states[1].items() if k != "rank"}  # any rank's state will do
    return first, taken, json.loads(json.dumps(states[0]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("world, batch", [(1, 3), (3, 1)])
def test_a_two_rank_state_resumes_on_another_world_size(folder, backend, world, batch):
    first, taken, state = _old_ranks(folder, backend)
    new = [_loader(folder, backend, rank=r, world_size=world, batch_size=batch)
           for r in range(world)]
    new[0].set_epoch(EPOCH - 1)
    assert len(list(new[0])) == len(new[0])  # the DALI engine reads ahead into EPOCH ...
    rest = []
    for loader in new:
        loader.load_state_dict(state)  # ... which must not leak into the resumed epoch
        loader.set_epoch(EPOCH)  # a resumed loop does this; it keeps the position
        lengths = len(loader)
        got = _samples(loader)
        assert len(got) == len(new[0].plan.rank_indices(EPOCH)) and \
            -(-len(got) // batch) == lengths  # len() counted the resumed epoch's batches
        rest += got
    assert len({len(loader.plan.rank_indices(EPOCH)) for loader in new}) == 1
    counts = Counter(i for i, _ in taken + rest)
    assert set(counts) == set(range(N))  # no sample of the epoch lost
    assert sum(counts.values()) - N == (-(N - 2 * 2 * STOP)) % world  # only the padding
    seen = set()
    for index, image in rest:  # the remaining samples keep their crops
        if index not in seen and index not in {i for i, _ in taken}:
            torch.testing.assert_close(image, first[index], rtol=0, atol=1e-6)
            seen.add(index)
    assert len(seen) == N - 2 * 2 * STOP
    for loader in new:  # later epochs are those of a fresh loader with the new layout
        fresh = _loader(folder, backend, rank=loader.plan.rank, world_size=world,
                        batch_size=batch)
        assert loader.epoch == EPOCH + 1 and len(loader) == len(fresh)
        fresh.set_epoch(EPOCH + 1)
        assert [i for i, _ in _samples(loader)] == [i for i, _ in _samples(fresh)]
        fresh.close(), loader.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_saved_during_a_resumed_epoch_resumes_again(folder, backend):
    """3 ranks resumed from 2, saved after one batch: the same layout continues exactly
    there; 1 rank (another batch size) gets the rest, and the epoch is still covered."""
    _, taken, state = _old_ranks(folder, backend)
    three = [_loader(folder, backend, rank=r, world_size=3, batch_size=1) for r in range(3)]
    rest_of_three, saved = [], []
    for loader in three:
        loader.load_state_dict(state)
        taken += _samples(loader, 1)
        saved.append(loader.state_dict())
        rest_of_three.append([i for i, _ in _samples(loader)][1:])  # a new pass: all again
        loader.close()
    assert saved[0]["resumed"] == {"start": 8, "stop": N}
    assert saved[0]["num_batches"] == 2 and saved[0]["batches_consumed"] == 1
    for rank in range(3):  # the same layout: exactly where it stopped
        again = _loader(folder, backend, rank=rank, world_size=3, batch_size=1)
        again.load_state_dict(saved[0])
        assert [i for i, _ in _samples(again)] == rest_of_three[rank]
        again.close()
    one = _loader(folder, backend, rank=0, world_size=1, batch_size=4)
    one.load_state_dict(saved[2])
    assert len(one) == 1
    rest = [i for i, _ in _samples(one)]
    assert Counter(i for i, _ in taken) + Counter(rest) >= Counter(range(N))
    assert len(rest) == N - 2 * 2 * STOP - 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_saved_after_the_last_batch_leaves_an_empty_epoch(folder, backend):
    old = _loader(folder, backend, rank=0, world_size=2, batch_size=2)
    batches = iter(old)
    for _ in range(len(old)):
        next(batches)  # the last batch taken, the pass not yet ended
    state = old.state_dict()
    assert state["batches_consumed"] == len(old) and state["epoch"] == 0
    new = _loader(folder, backend, rank=2, world_size=3, batch_size=3)
    new.load_state_dict(state)
    assert len(new) == 0 and list(new) == [] and new.epoch == 1
    assert len(_samples(new)) == len(new.plan.rank_indices(1)) == 5  # then whole epochs


def test_choosing_another_epoch_ends_the_elastic_resume(folder):
    _, _, state = _old_ranks(folder, "torch")
    loader = _loader(folder, "torch", rank=0, world_size=1, batch_size=4)
    loader.load_state_dict(state)
    assert len(loader) == 2  # 5 samples left of the epoch: 2 batches of 4
    loader.set_epoch(EPOCH + 3)
    assert len(loader) == 4 and loader.state_dict()["resumed"] is None
    loader.set_epoch(EPOCH)  # the resumed epoch again: now a whole one
    assert len(_samples(loader)) == N


def test_a_source_aware_state_resumes_under_another_layout_only_at_an_epoch_boundary(
        tmp_path):
    sources = [write_image_folder(tmp_path / f"s{k}", n_images=6, n_classes=2, seed=k)
               for k in range(2)]
    two = _loader(sources, "torch", rank=0, world_size=2, batch_size=2, min_per_source=1)
    next(iter(two))
    one = _loader(sources, "torch", rank=0, world_size=1, batch_size=2, min_per_source=1)
    with pytest.raises(ValueError, match="min_per_source=1 lays each epoch out for one "
                                         "world size.*batches_consumed 0"):
        one.load_state_dict(two.state_dict())
    assert one.epoch == 0 and len(one) == 6  # nothing was loaded
    two.set_epoch(4)
    assert two.state_dict()["batches_consumed"] == 0  # a new epoch: nothing consumed
    one.load_state_dict(two.state_dict())  # at an epoch boundary: a whole epoch of epoch 4
    assert one.epoch == 4 and len(_samples(one)) == 12


# Under torchrun ---------------------------------------------------------------------------
WORKER = Path(__file__).with_name("elastic_worker.py")
REPO = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT_S = 300


def test_torchrun_two_ranks_to_one_and_one_to_two_for_every_modality(tiny_data, tmp_path):
    """One launch of 2 processes; per modality, one backend saves under 2 ranks and 1
    rank resumes, the other saves under 1 rank and 2 ranks resume (elastic_worker.py)."""
    cases = []
    for k, kind in enumerate(MODALITY_KINDS):
        tiny = tiny_data(kind)
        options = {key: v for key, v in tiny.options.items() if key != "batch_size"}
        cases.append({"kind": kind, "modality": tiny.modality, "data": str(tiny.one),
                      "options": options, "batch_size": tiny.options["batch_size"] // 2 or 1,
                      "backends": list(BACKENDS[::1 - 2 * (k % 2)])})
    spec, out = tmp_path / "spec.json", tmp_path / "out"
    out.mkdir()
    spec.write_text(json.dumps({"epoch": 1, "cases": cases}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2", str(WORKER), str(spec), str(out)]
    try:
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun did not finish in {LAUNCH_TIMEOUT_S} s\nstderr:\n{exc.stderr}")
    reports = [out / f"rank{r}.json" for r in range(2)]
    if proc.returncode != 0 or not all(p.exists() for p in reports):
        pytest.fail(f"torchrun exit {proc.returncode}\nstdout:\n{proc.stdout}\n"
                    f"stderr:\n{proc.stderr}")
    per_rank = [json.loads(p.read_text()) for p in reports]
    for case in cases:
        for direction in ("2->1", "1->2"):
            _check_direction(case, direction, [r[case["kind"]][direction] for r in per_rank])


def _check_direction(case: dict, direction: str, per_rank: list[dict]) -> None:
    """Old ranks' heads + new ranks' rests: every sample of the epoch, each remaining one
    with its old checksum, nothing repeated beyond the padding of the two layouts."""
    where = f"{case['kind']} {direction}"
    heads = [s for res in per_rank for s in res.get("head", [])]
    rests = [s for res in per_rank for s in res.get("rest", [])]
    full = {i: c for res in per_rank for i, c in res.get("first", [])}
    n = per_rank[0]["num_samples"]
    old_world, new_world = (2, 1) if direction == "2->1" else (1, 2)
    counts = Counter(i for i, _ in heads + rests)
    assert set(counts) == set(range(n)), where  # nothing lost
    left = n - len(heads)  # the heads hold no padding: the old ranks stopped early
    assert sum(counts.values()) - n == (-left) % new_world, where  # only the padding
    assert len({res["len"] for res in per_rank if "len" in res}) == 1, where
    taken, got = {i for i, _ in heads}, {}
    for index, checksum in rests:
        got.setdefault(index, []).append(checksum)
    for index in set(range(n)) - taken:  # each as the old ranks would have yielded it
        assert any(c == pytest.approx(full[index], rel=1e-6, abs=1e-6) for c in got[index]), \
            (where, index)
    assert old_world != new_world
