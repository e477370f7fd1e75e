"""make_loader inside Ray Train, on a real local Ray (CPU workers), both backends.

One Ray instance serves the module (`local_ray`: 2 CPUs, its servers on 127.0.0.1 only,
stopped at the end), and every Ray test of make_loader is in this module (the pack tool's
are in tests/test_pack_ray.py, with the same fixture). pytest-xdist's worksteal may
still hand some of them to a second worker, which then starts an instance of its own: Ray
picks free ports, each instance has its own temporary folder, and `address="local"` never
joins another one.

The TorchTrainer test trains twice: 2 workers through one epoch and a part of the next,
rank 0 saving both backends' loader states in a `ray.train.Checkpoint`; then 1 worker,
handed that checkpoint through `train_loop_config`, finishing the epoch. The training
functions are in ray_train_loops.py (Ray's workers import it). A test of another kind of
data (object storage read inside the trainer) adds its server fixture beside `tiny_images`
and its training function in ray_train_loops.py, and reuses `local_ray` and `fit`: the S3
test packs `tiny_images` on this Ray from a bucket into a bucket (moto's S3 on 127.0.0.1,
`moto_s3`) and trains on those shards, read from the bucket inside each worker (through
`record_epochs` with the bucket's loader options).
"""
from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

import torch_bridge
from tests.conftest import BACKENDS, write_image_folder
from tests.integrations import ray_train_loops
from torch_bridge.order.plan import EpochPlan
from torch_bridge.order.ray_ranks import train_ranks

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason='needs Ray Train: pip install -e ".[ray]"'),
    # Ray Data's own option renames, warned when Ray Train loads its defaults
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

REPO = Path(__file__).resolve().parents[2]
N_IMAGES, BATCH, SEED = 12, 2, 5
STOP_AFTER = 1  # batches of epoch 1 the 2-worker run takes before it stops
RAY_ENV = {
    # On Linux Ray binds its servers to every interface and advertises the machine's
    # address, even for _node_ip_address="127.0.0.1"; marked as a one-machine instance
    # (read when ray is first imported) it binds to loopback only.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def _import_ray(env: pytest.MonkeyPatch):
    """`ray`, imported with RAY_ENV set (kept set by `env` for the processes Ray starts)."""
    for name, value in RAY_ENV.items():
        env.setenv(name, value)
    import ray
    return ray


@pytest.fixture(scope="module")
def local_ray():
    """`ray`, initialised: a local instance with 2 CPUs on 127.0.0.1, no dashboard, quiet,
    in a session folder of its own; its workers import this checkout's torch_bridge and
    tests (PYTHONPATH)."""
    root = str(Path(torch_bridge.__file__).resolve().parents[1])
    # its own session folder, removed at the end; short, as Ray's socket paths must be
    temp = tempfile.mkdtemp(prefix="ray-")
    with pytest.MonkeyPatch.context() as env:
        ray = _import_ray(env)
        env.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        ray.init(address="local", num_cpus=2, _node_ip_address="127.0.0.1",
                 include_dashboard=False, logging_level="ERROR", log_to_driver=False,
                 _temp_dir=temp)
        try:
            yield ray
        finally:
            ray.shutdown()
            shutil.rmtree(temp)


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("ray_images"), n_images=N_IMAGES,
                              n_classes=2)


@pytest.fixture(scope="module")
def moto_s3():
    """moto's S3 server on 127.0.0.1 (tests/stores/servers.py), reached by Ray's workers."""
    from tests.stores.servers import MotoS3
    with MotoS3() as server:
        yield server


def fit(tmp: Path, name: str, train_loop, config: dict, *, workers: int, trainer=None):
    """One Ray Train run of `train_loop` on `workers` CPU workers (TorchTrainer unless
    `trainer` is given); -> (its Result, each worker's record by world rank)."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    out = tmp / f"{name}_records"
    out.mkdir()
    result = (trainer or TorchTrainer)(
        train_loop, train_loop_config={**config, "out": str(out)},
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=False),
        run_config=RunConfig(name=name, storage_path=str(tmp / "ray_storage"))).fit()
    records = {int(p.stem[len("rank"):]): json.loads(p.read_text()) for p in out.iterdir()}
    assert sorted(records) == list(range(workers)), records
    return result, records


def _plan(rank: int, world_size: int) -> EpochPlan:
    return EpochPlan(N_IMAGES, BATCH, seed=SEED, shuffle=True, rank=rank,
                     world_size=world_size)


def test_torch_trainer_shards_by_rank_and_resumes_on_one_worker(local_ray, tiny_images,
                                                                tmp_path):
    """Both backends in each worker. 2 workers (one feed / DataLoader worker forked inside
    each): epoch 0 in disjoint shares, the ranks Ray's; then one batch of epoch 1 and rank
    0's checkpoint. 1 worker handed that checkpoint through train_loop_config: the rest of
    epoch 1, so that the two runs give each sample of it exactly once. (One test, not one
    per check: pytest-xdist could steal a part and train again in a second Ray.)"""
    config = {"data": str(tiny_images), "backends": list(BACKENDS), "batch_size": BATCH,
              "seed": SEED, "epochs": 2}
    first, two = fit(tmp_path, "two_workers", ray_train_loops.record_epochs,
                     {**config, "stop_after": STOP_AFTER, "workers": 1}, workers=2)
    assert first.checkpoint is not None
    _, one = fit(tmp_path, "one_worker", ray_train_loops.record_epochs,
                 {**config, "resume": first.checkpoint}, workers=1)
    for backend in BACKENDS:
        _check_shares(two, backend)
        _check_exactly_once(two, one[0]["backends"][backend], backend)


@pytest.mark.slow
def test_shards_packed_on_ray_train_from_s3_and_resume_on_one_worker(local_ray, moto_s3,
                                                                     tiny_images, tmp_path):
    """`tiny_images` packed on Ray from a bucket into a bucket (`engine="ray"`), their
    labels the folder's; a TorchTrainer of 2 workers reads the shards from the bucket (DALI
    backend, the block cache and shard indexes under tmp_path), rank 0 checkpoints one batch
    into epoch 1, and 1 worker resumes: every sample of that epoch exactly once."""
    from dali_pipes.pack import PackRun, pack
    from dali_pipes.sources.image import ImageFolderSource
    from dali_pipes.sources.shards import ShardSource
    from dali_pipes.stores.remote import FsspecStore

    src = moto_s3.put_tree(tiny_images, "train", "images")
    manifest = pack(src, "s3://train/shards", shard_size=8_000, progress=False,
                    run=PackRun(engine="ray", storage_options=moto_s3.options))
    assert manifest["shards_total"] > 2
    store = FsspecStore(storage_options=moto_s3.options, cache_dir=str(tmp_path / "cache"))
    assert ShardSource("s3://train/shards/", store=store).labels.tolist() == \
        ImageFolderSource(tiny_images).labels.tolist()
    config = {"data": "s3://train/shards/", "backends": ["dali"], "batch_size": BATCH,
              "seed": SEED, "epochs": 2,
              "options": {"storage_options": moto_s3.options,
                          "cache_dir": str(tmp_path / "cache")}}
    first, two = fit(tmp_path, "s3_two_workers", ray_train_loops.record_epochs,
                     {**config, "stop_after": STOP_AFTER, "workers": 1}, workers=2)
    assert first.checkpoint is not None
    _, one = fit(tmp_path, "s3_one_worker", ray_train_loops.record_epochs,
                 {**config, "resume": first.checkpoint}, workers=1)
    _check_shares(two, "dali")
    _check_exactly_once(two, one[0]["backends"]["dali"], "dali")


def _check_shares(two: dict, backend: str) -> None:
    seen = {rank: record["backends"][backend]["epochs"]["0"] for rank, record in two.items()}
    for rank, record in two.items():
        assert record["process_group"]  # TorchTrainer's: where make_loader found the ranks
        assert record["train_ranks"] == [rank, 2]
        assert record["backends"][backend]["plan"] == [rank, 2], backend
        assert seen[rank] == _plan(rank, 2).rank_indices(0).tolist(), backend
    assert sorted(seen[0] + seen[1]) == list(range(N_IMAGES)), (backend, seen)


def _check_exactly_once(two: dict, after: dict, backend: str) -> None:
    before = [i for record in two.values() for i in record["backends"][backend]["epochs"]["1"]]
    assert len(before) == 2 * STOP_AFTER * BATCH, backend
    assert after["plan"] == [0, 1], backend
    assert list(after["epochs"]) == ["1"], backend  # the resumed epoch, then none: epochs=2
    assert sorted(before + after["epochs"]["1"]) == list(range(N_IMAGES)), (backend, before,
                                                                            after)


def test_ray_listens_on_loopback_only(local_ray):
    """Every socket the local Ray's processes listen on (its servers, agents and workers) is
    on 127.0.0.1."""
    ray_processes = psutil.Process().children(recursive=True)
    assert any("raylet" in p.name() for p in ray_processes)
    listening = {(p.name(), c.laddr.ip) for p in ray_processes
                 for c in _sockets(p) if c.status == psutil.CONN_LISTEN}
    assert listening and {ip for _, ip in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, \
        listening


def _sockets(process: psutil.Process) -> list:
    try:
        return process.net_connections(kind="inet")
    except psutil.NoSuchProcess:  # an idle worker Ray stopped meanwhile
        return []


@pytest.mark.slow
def test_ranks_from_ray_context_without_a_process_group(local_ray, tiny_images, tmp_path):
    """A Ray Train worker without torch.distributed (a trainer of another backend): the
    ranks come from Ray's context, not from RANK / WORLD_SIZE (which Ray sets only for
    torch)."""
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    config = {"data": str(tiny_images), "backends": ["torch"], "batch_size": BATCH,
              "seed": SEED, "epochs": 1}
    _, records = fit(tmp_path, "no_process_group", ray_train_loops.record_epochs, config,
                     workers=2, trainer=DataParallelTrainer)
    for rank, record in records.items():
        assert not record["process_group"]
        assert record["backends"]["torch"]["plan"] == [rank, 2]
        assert record["backends"]["torch"]["epochs"]["0"] == _plan(rank, 2).rank_indices(0).tolist()


def test_train_ranks_outside_ray_train(monkeypatch):
    """No Ray Train worker, no ranks: with ray.train not imported (never imported by it),
    and in a process that imported it (this one, as a Ray driver)."""
    monkeypatch.delitem(sys.modules, "ray.train", raising=False)
    assert train_ranks() is None
    assert "ray.train" not in sys.modules
    monkeypatch.undo()
    _import_ray(monkeypatch)
    import ray.train  # noqa: F401
    assert train_ranks() is None


def test_train_ranks_declines_ray_train_1():
    """Ray Train 1 answers rank 0 of 1 outside a training function, with a warning: it is not
    asked (a fresh process, where ray.train loads as Ray Train 1; warnings are errors)."""
    code = ("import warnings; warnings.simplefilter('error'); import ray.train; "
            "from torch_bridge.order.ray_ranks import train_ranks; "
            "assert train_ranks() is None; print('declined')")
    env = {**os.environ, **RAY_ENV, "RAY_TRAIN_V2_ENABLED": "0",
           "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and "declined" in run.stdout, run.stderr[-3000:]


@pytest.mark.slow
def test_a_loader_in_a_ray_tune_trial(local_ray, tiny_images, tmp_path):
    """Inside a Tune trial Ray Train's get_context() raises DeprecationWarning: make_loader
    takes rank 0 of 1 there and reads the whole data set."""
    from ray import tune

    tuner = tune.Tuner(ray_train_loops.tune_trial, param_space={"data": str(tiny_images)},
                       run_config=tune.RunConfig(name="tune",
                                                 storage_path=str(tmp_path / "ray_storage")))
    [result] = list(tuner.fit())
    assert result.error is None, result.error
    assert result.metrics["rank"] == 0 and result.metrics["world_size"] == 1
    assert result.metrics["samples"] == N_IMAGES


@pytest.mark.slow
def test_the_documented_example_runs_as_written(local_ray, tmp_path, monkeypatch):
    """docs/ray.md's example, only its data path replaced (as tests/test_doc_blocks.py does),
    on 320 JPEGs: run 1 (2 workers, 5 steps per epoch) checkpoints at step 4 and stops at
    6; run 2 (1 worker) resumes at step 4, takes the 64 samples left of epoch 0 (2 steps)
    and epoch 1 (10 steps) and checkpoints at step 16."""
    from tests.test_doc_blocks import extract, substitute

    [block] = [b for b in extract(REPO / "docs" / "ray.md") if b.lang == "python"]
    data = write_image_folder(tmp_path / "train", n_images=320, n_classes=2)
    script = tmp_path / "ray_example.py"
    script.write_text(substitute(block.code, {"/data/train": str(data)}))
    monkeypatch.chdir(tmp_path)
    names = runpy.run_path(str(script), run_name="__main__")
    assert names["first"].metrics["step"] == 4
    assert names["second"].metrics["step"] == 16
