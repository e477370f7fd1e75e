"""The pack tool on Ray: a local Ray on 127.0.0.1 (one for the module, `local_ray` of
tests/integrations/test_ray_train.py) and moto's S3. A pack from a bucket into a bucket with
a Ray worker SIGKILLed mid-shard retries the shard and writes what the local engine writes;
a driver killed mid-run is resumed by a rerun that rewrites no finished shard; a sample that
cannot be read stops the run with the local engine's report."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from PIL import Image

from dali_pipes.pack import PackRun, main, pack
from tests.integrations import test_ray_train
from tests.stores.servers import MotoS3
from tests.test_pack_resume import _cli
from tests.test_pack_stores import local_tree, objects, same_shards, versions

local_ray = test_ray_train.local_ray  # the module's one Ray (its tests use it by name)
pytestmark = [
    pytest.mark.usefixtures("local_ray"),
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason='needs Ray: pip install -e ".[ray]"'),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

ROOT = Path(__file__).parents[1]
SHARD = 300_000  # bytes: two of the photos below per shard
TASK = "ray::pack_shard"  # the title of a Ray worker running a shard's task


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """12 noisy 1200x1200 JPEGs in 2 classes: resizing each with --max-side keeps a task
    busy long enough to be killed mid-shard."""
    root = tmp_path_factory.mktemp("ray_pack") / "src"
    rng = np.random.default_rng(0)
    for i in range(12):
        folder = root / f"class_{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (1200, 1200, 3), dtype="uint8")
        Image.fromarray(pixels).save(folder / f"img_{i:02d}.jpg", quality=20)
    return root


def _busy_workers() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if cmdline and cmdline[0].startswith(TASK):
            found.append(p)
    return found


def _kill_one_busy_worker(done: threading.Event) -> int | None:
    """SIGKILL the first Ray worker seen running a shard; its pid (None: the pack ended)."""
    while not done.is_set():
        for p in _busy_workers():
            try:
                p.send_signal(signal.SIGKILL)
                return p.pid
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.002)
    return None


def test_a_killed_worker_is_retried_and_the_shards_equal_the_local_engines(
        s3, photos, tmp_path, capsys):
    src = s3.put_tree(photos, "ray", "src")
    options = {"shard_size": SHARD, "max_side": 256, "progress": False}
    done, result = threading.Event(), {}

    def packing():
        try:
            result["manifest"] = pack(src, "s3://ray/out", engine="ray",
                                      storage_options=s3.options, **options)
        finally:
            done.set()
    thread = threading.Thread(target=packing)
    thread.start()
    killed = _kill_one_busy_worker(done)
    thread.join()
    err = capsys.readouterr().err
    assert killed is not None and "manifest" in result, err
    assert "task failed (WorkerCrashedError" in err and "retrying it (attempt 2 of 4)" in err
    pack(src, "s3://ray/local", run=PackRun(storage_options=s3.options), **options)
    on_ray, on_local = objects(s3, "s3://ray/out"), objects(s3, "s3://ray/local")
    assert on_ray == on_local  # shards, records, plan and manifest, byte for byte
    pack(photos, tmp_path / "local", **options)
    same_shards(on_ray, local_tree(tmp_path / "local"))


def test_an_unreadable_sample_gets_the_local_engines_report(tmp_path, capsys):
    src = tmp_path / "src"
    for i in range(4):
        (src / f"class_{i % 2}").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (80, 60), (i * 40, 0, 0)).save(src / f"class_{i % 2}" / f"{i}.jpg")
    (src / "class_1" / "3.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    reports = []
    for engine in ("local", "ray"):
        code, err = _cli(capsys, src, tmp_path / engine, "--max-side", 32, "--engine", engine)
        assert code == 1, err
        reports.append([line for line in err.splitlines() if ": failed: " in line])
    assert reports[0] == reports[1] and len(reports[0]) == 1
    assert "3.jpg: cannot be decoded to resize it" in reports[1][0]


@pytest.mark.slow
def test_a_killed_driver_is_resumed_without_rewriting_a_finished_shard(s3, photos, capsys):
    """The driver (a CLI on this Ray, through --ray-address) is SIGKILLed after its first
    shard; a rerun with the local engine keeps every finished shard (S3 versioning: no new
    version) and ends with the output of a run never stopped."""
    src = s3.put_tree(photos, "resume", "src")
    s3.client().put_bucket_versioning(Bucket="resume",
                                      VersioningConfiguration={"Status": "Enabled"})
    dst, storage = "s3://resume/out", json.dumps(s3.options)
    argv = [src, dst, "--shard-size", SHARD, "--max-side", 256, "--storage-options", storage]
    import ray
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, "-m", "dali_pipes.pack", *map(str, argv),
                             "--engine", "ray", "--ray-address", address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **test_ray_train.RAY_ENV,
                                 "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 300
    while not any(n.endswith(".tar.json") for n in objects(s3, dst)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    while _busy_workers() and time.monotonic() < deadline:  # Ray ends the dead driver's tasks
        time.sleep(0.05)
    # finished = a shard with its record; a shard the killed tasks wrote without one is not
    records = {n for n in objects(s3, dst) if n.endswith(".tar.json")}
    finished = {k: v for k, v in versions(s3, dst).items() if f"{k}.json" in records}
    assert "manifest.json" not in objects(s3, dst) and finished
    code, err = _cli(capsys, *argv)
    assert code == 0, err
    after = versions(s3, dst)
    assert {k: after[k] for k in finished} == finished  # kept, not written again
    assert main([*map(str, argv[:1]), "s3://resume/fresh", *map(str, argv[2:])]) == 0
    assert objects(s3, dst) == objects(s3, "s3://resume/fresh")
