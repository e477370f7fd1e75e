"""The loader under torchrun: 2 CPU processes, gloo, every modality and both backends.

One launch of tests/torch_bridge/dist_worker.py (module fixture) runs every case on both
ranks; the tests below compare the two ranks' JSON reports. Data set sizes are odd, so the
plan pads: the epoch order (before sharding) wraps around to a multiple of the world size,
then rank r takes every world_size-th position from r (torch_bridge/order/plan.py, like
DistributedSampler). With N samples and W ranks the padded global order g has
W * ceil(N / W) entries, g[:N] is a permutation of the data set and g[N:] == g[:len(g) - N].
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.sample_data.sample_fusion import small_fusion_folder
from dali_pipes.sample_data.sample_hyperspectral import write_scene
from dali_pipes.sample_data.sample_video import small_video_folder
from tests.conftest import BACKENDS, write_image_folder
from torch_bridge.order.plan import EpochPlan

WORLD = 2
EPOCH = 1  # dist_worker.EPOCH
WORKER = Path(__file__).with_name("dist_worker.py")
REPO = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT_S = 300
CLIPS = {"clip_length": 4, "stride": 1, "size": None}
FRAMES, VIDEO_SIZE = (12, 16, 14), (32, 24)


def _hyperspectral_scene(folder: Path) -> int:
    """One small ENVI cube with 11 labeled pixels (edges and corners included)."""
    rng = np.random.default_rng(7)
    values = rng.integers(0, 3000, size=(6, 7, 4)).astype(np.int16)
    labels = np.zeros((6, 7), np.int32)
    spots = [(0, 0), (0, 6), (5, 0), (5, 6), (1, 2), (2, 3), (2, 5), (3, 1), (3, 4),
             (4, 2), (4, 5)]
    for k, (y, x) in enumerate(spots):
        labels[y, x] = 1 + k % 3
    write_scene(folder, "scene", values, labels, np.linspace(400.0, 900.0, 4), kind="envi")
    return len(spots)


def _cases(root: Path) -> list[dict]:
    """Data sets with an odd number of samples each, and what the worker is to run."""
    image = write_image_folder(root / "image", n_images=13, n_classes=3)
    source_a = write_image_folder(root / "multi_a", n_images=4, n_classes=2, seed=1)
    source_b = write_image_folder(root / "multi_b", n_images=5, n_classes=2, seed=2)
    video = small_video_folder(root / "video", n_videos=5, frames=FRAMES, size=VIDEO_SIZE)
    fusion = small_fusion_folder(root / "fusion", n_videos=5, frames=FRAMES,
                                 size=VIDEO_SIZE)
    n_patches = _hyperspectral_scene(root / "hsi")

    def case(name, modality, data, n, sources, batch_size, stop_after, **options):
        return {"name": name, "modality": modality, "data": data, "num_samples": n,
                "sources": sources, "batch_size": batch_size, "stop_after": stop_after,
                "seed": 11, "options": options}

    return [
        case("image", "image", str(image), 13, [13], 2, 2, size=32),
        case("video", "video", str(video), 5, [5], 2, 1, **CLIPS),
        case("hyperspectral", "hyperspectral", str(root / "hsi"), n_patches, [n_patches],
             2, 2, patch_size=3),
        case("fusion", "fusion", str(fusion), 5, [5], 2, 1, imu_offset=0.25, **CLIPS),
        case("multi_image", "image", [str(source_a), str(source_b)], 9, [4, 5], 2, 1,
             size=32),
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Launch torchrun once; return ({case name: case}, [rank 0 report, rank 1 report])."""
    root = tmp_path_factory.mktemp("dist")
    cases = _cases(root / "data")
    spec, out = root / "spec.json", root / "out"
    out.mkdir()
    spec.write_text(json.dumps({"cases": cases, "backends": list(BACKENDS)}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={WORLD}", str(WORKER), str(spec), str(out)]
    try:
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun did not finish in {LAUNCH_TIMEOUT_S} s\nstdout:\n"
                    f"{exc.stdout}\nstderr:\n{exc.stderr}")
    logs = f"torchrun exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    reports = [out / f"rank{r}.json" for r in range(WORLD)]
    if proc.returncode != 0 or not all(p.exists() for p in reports):
        pytest.fail(logs)
    return {c["name"]: c for c in cases}, [json.loads(p.read_text()) for p in reports]


CASE_NAMES = ("image", "video", "hyperspectral", "fusion", "multi_image")


@pytest.fixture(params=[(c, b) for c in CASE_NAMES for b in BACKENDS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def result(request, run):
    """(case spec, [rank 0 result, rank 1 result]) of one case on one backend."""
    cases, reports = run
    name, backend = request.param
    per_rank = [report["cases"][f"{name}/{backend}"] for report in reports]
    for rank, res in enumerate(per_rank):
        assert "error" not in res, f"rank {rank}:\n{res.get('error')}"
    return cases[name], per_rank


def _flat(batches: list[list]) -> list:
    return [x for batch in batches for x in batch]


def _global_order(per_rank: list[dict]) -> list[int]:
    """Undo the sharding: position j of rank r is position r + W * j of the padded order."""
    shards = [_flat(res["full"]["index"]) for res in per_rank]
    assert len({len(s) for s in shards}) == 1, "ranks got different numbers of samples"
    return [shard[j] for j in range(len(shards[0])) for shard in shards]


def test_rank_and_world_size_come_from_torch_distributed(run):
    """The worker sets RANK=0, WORLD_SIZE=1 after init_process_group; the loaders must still
    see each process's torch.distributed rank."""
    _, reports = run
    assert [r["rank"] for r in reports] == [0, 1]
    assert [r["env"]["WORLD_SIZE"] for r in reports] == [str(WORLD)] * WORLD
    for rank, report in enumerate(reports):
        for key, res in report["cases"].items():
            if "error" not in res:
                assert (res["plan_rank"], res["plan_world_size"]) == (rank, WORLD), key


def test_equal_length_and_batches_on_every_rank(result):
    case, per_rank = result
    n, b = case["num_samples"], case["batch_size"]
    per_rank_samples = math.ceil(n / WORLD)
    expected_len = math.ceil(per_rank_samples / b)
    for rank, res in enumerate(per_rank):
        sizes = [len(batch) for batch in res["full"]["index"]]
        assert res["len"] == expected_len, rank
        assert len(sizes) == expected_len, rank  # yielded == len: DDP never waits on a rank
        assert sizes == [b] * (expected_len - 1) + [per_rank_samples - b * (expected_len - 1)]
        assert res["epoch_after_pass"] == EPOCH + 1


def test_coverage_disjoint_shards_and_padding(result):
    case, per_rank = result
    n = case["num_samples"]
    order = _global_order(per_rank)
    pad = len(order) - n
    assert len(order) == WORLD * math.ceil(n / WORLD) and 0 < pad < WORLD  # odd n pads
    assert sorted(order[:n]) == list(range(n))  # every index, once, before the padding
    assert order[n:] == order[:pad]  # padding wraps around to the start of the order
    shards = [_flat(res["full"]["index"]) for res in per_rank]
    assert set().union(*shards) == set(range(n))
    assert set(shards[0]) & set(shards[1]) == set(order[:pad])  # only the padded repeats
    extra = Counter(shards[0] + shards[1]) - Counter(range(n))
    assert extra == Counter(order[:pad])
    for rank, shard in enumerate(shards):  # the same as the plan computes for this rank
        plan = EpochPlan(n, case["batch_size"], seed=case["seed"], rank=rank,
                         world_size=WORLD)
        assert shard == plan.rank_indices(EPOCH).tolist()


def test_padded_repeat_is_the_same_sample_drawn_again(result):
    """The repeat on the last rank is the same index in the same epoch (same label), drawn
    a second time: its augmentation key is index + num_samples (torch_bridge.order.plan), so it
    gets augmentation of its own, as a DataLoader's random transforms would give it."""
    case, per_rank = result
    n = case["num_samples"]
    samples = {}
    for res in per_rank:
        full = res["full"]
        for index, label in zip(_flat(full["index"]), _flat(full["label"]), strict=True):
            samples.setdefault(index, []).append(label)
    repeats = {i: s for i, s in samples.items() if len(s) > 1}
    assert len(repeats) == WORLD * math.ceil(n / WORLD) - n
    assert all(labels[0] == labels[1] for labels in repeats.values())
    plans = [EpochPlan(n, case["batch_size"], seed=case["seed"], rank=rank, world_size=WORLD)
             for rank in range(WORLD)]
    keys = np.concatenate([plan.rank_keys(EPOCH) for plan in plans])
    indices = np.concatenate([plan.rank_indices(EPOCH) for plan in plans])
    assert np.array_equal(keys % n, indices)
    assert sorted((keys[keys >= n] - n).tolist()) == sorted(repeats)


def test_source_ids(result):
    """Indices run over the sources in order; source_id is the folder's position."""
    case, per_rank = result
    bounds = np.cumsum(case["sources"])
    for res in per_rank:
        full = res["full"]
        if case["name"] == "multi_image":
            assert full["source_id"], "multi-source batches need source_id"
        if not full["source_id"]:
            continue
        expected = np.searchsorted(bounds, _flat(full["index"]), side="right").tolist()
        assert _flat(full["source_id"]) == expected
    if case["name"] == "multi_image":
        ids = {s for res in per_rank for s in _flat(res["full"]["source_id"])}
        assert ids == {0, 1}


def test_resume_per_rank_continues_exactly(result):
    """Each rank stopped after `stop_after` batches, saved its state and a fresh loader on
    that rank loaded it: the rest equals the uninterrupted pass, indices and values."""
    case, per_rank = result
    stop = case["stop_after"]
    for rank, res in enumerate(per_rank):
        full, head, tail = res["full"], res["head"], res["tail"]
        assert 0 < stop < res["len"]
        assert head["index"] == full["index"][:stop], rank
        assert tail["index"] == full["index"][stop:], rank
        assert tail["label"] == full["label"][stop:], rank
        assert tail["source_id"] == full["source_id"][stop:], rank
        assert _flat(tail["checksum"]) == pytest.approx(_flat(full["checksum"][stop:]),
                                                        rel=1e-6), rank
        state = res["state"]
        assert (state["epoch"], state["batches_consumed"]) == (EPOCH, stop), rank
        assert (state["rank"], state["world_size"]) == (rank, WORLD), rank
        assert res["resumed_len"] == res["len"], rank


@pytest.mark.parametrize("name", CASE_NAMES)
def test_backends_agree_per_rank(run, name):
    """Same seed and epoch: both backends give each rank the same indices, in order."""
    _, reports = run
    for report in reports:
        dali, torch_ = (report["cases"][f"{name}/{b}"] for b in BACKENDS)
        assert "error" not in dali and "error" not in torch_
        assert dali["full"]["index"] == torch_["full"]["index"]
        assert dali["full"]["label"] == torch_["full"]["label"]
