"""Engine reliability: passes that end, errors in their own epoch, no hang on a dead worker or
a full /dev/shm, one live iterator per loader, and every DDP rank yielding len(loader).

Each test bounds its wait (`_bounded`): the failures fixed here showed up as hangs.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

# The decoders the torch backend's workers import on first use: imported here, forked
# workers inherit them instead of each paying seconds to import them.
import torchvision.io  # noqa: F401
import torchvision.transforms.v2.functional  # noqa: F401

from dali_pipes.pipelines.config import load_config
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from tests.conftest import write_image_folder
from torch_bridge import SampleError, make_loader
from torch_bridge.engines import _feeders as feeders
from torch_bridge.engines.dali import DaliEngine
from torch_bridge.errors import SampleGuard, WorkerDied
from torch_bridge.loader import Loader
from torch_bridge.modalities.hyperspectral import HyperspectralModality
from torch_bridge.order.plan import EpochPlan

REPO = Path(__file__).resolve().parents[3]
# "dali-workers": the DALI backend with two feed worker processes
BACKENDS = ("dali", "dali-workers", "torch")


def _bounded(work, seconds: float = 60.0):
    """work() in a thread; fail (instead of hanging the suite) when it takes longer."""
    done: dict = {}

    def run():
        try:
            done["value"] = work()
        except BaseException as exc:  # re-raised in the test's thread
            done["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: it hangs"
    if "error" in done:
        raise done["error"]
    return done["value"]


def _image_loader(root, backend, **kw):
    extra = {"dali": {}, "dali-workers": {"config": {"py_num_workers": 2}},
             "torch": {"backend": "torch", "reference": {"num_workers": 2}}}[backend]
    return make_loader("image", root, size=16, **extra, **kw)


def _indices(batches) -> list[int]:
    return [i for b in batches for i in b["index"].tolist()]


# 15.1: every remaining sample bad ----------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_folder_of_empty_files_ends_each_pass_with_every_sample_skipped(tmp_path, backend):
    for c in range(2):
        (tmp_path / f"class_{c}").mkdir()
        for i in range(9):
            (tmp_path / f"class_{c}" / f"img_{i}.jpg").write_bytes(b"")
    loader = _image_loader(tmp_path, backend, batch_size=4, on_error="skip")
    for epoch in range(2):
        assert _bounded(lambda: list(loader)) == []
        assert sorted(s.index for s in loader.skipped if s.epoch == epoch) == list(range(18))
        if backend != "torch":  # run-ahead prepared no more than the prefetch depth
            assert len(loader._engine._pending) <= loader._engine.config.prefetch_queue_depth
    assert loader.epoch == 2
    loader.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_data_folder_deleted_mid_epoch_ends_the_pass(tmp_path, backend):
    root = write_image_folder(tmp_path / "d", n_images=40, n_classes=2)
    loader = _image_loader(root, backend, batch_size=4, on_error="skip", shuffle=False)
    it = iter(loader)
    first = [next(it)]
    shutil.rmtree(root)
    rest = _bounded(lambda: list(it))
    seen = _indices(first + rest)
    skipped = [s.index for s in loader.skipped]
    assert sorted(seen + skipped) == list(range(40)) and skipped
    assert all(s.epoch == 0 and s.path.startswith(str(root)) for s in loader.skipped)
    assert _bounded(lambda: list(loader)) == [] and len(loader.skipped) == len(skipped) + 40
    loader.close()


# 15.11: errors of read-ahead surface in their own epoch -----------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_read_ahead_is_raised_in_its_own_epoch(tmp_path, backend):
    """Index 0 goes bad after epoch 0 read it: epoch 0 still yields all its batches, and the
    error comes in the pass of the (later) epoch whose read found it, naming that epoch
    (epoch 1 without feed workers; with them, epoch 1 may have been read already)."""
    root = write_image_folder(tmp_path / "d", n_images=8, n_classes=1)
    loader = _image_loader(root, backend, batch_size=2, shuffle=False)
    it = iter(loader)
    batches = [next(it)]
    (root / "class_0" / "img_0000.jpg").write_bytes(b"")
    batches += _bounded(lambda: list(it))
    assert _indices(batches) == list(range(8)) and loader.epoch == 1
    for _ in range(3):
        epoch = loader.epoch
        try:
            assert _indices(_bounded(lambda: list(loader))) == list(range(8))
        except SampleError as exc:
            assert str(exc).startswith(f"epoch {epoch}, batch 0: sample 0 (")
            assert exc.index == 0 and exc.path.endswith("img_0000.jpg")
            break
    else:
        pytest.fail("the bad file was never reported")
    assert epoch == 1 or backend == "dali-workers"
    loader.close()


# 15.2: a feed worker killed half-way through sending its result ---------------------------

class _DiesSendingHalfAResult(HyperspectralModality):
    """In a feed worker, for the batch holding index `fatal`: writes the first part of a
    result frame into its result pipe, then SIGKILLs itself (as the OOM killer would)."""

    fatal = 5

    def feeds(self, epoch, indices, guard, keys=None):
        results = feeders._worker.get("results")
        if results is not None and self.fatal in np.asarray(indices).tolist():
            os.write(results.fileno(), struct.pack("<Q", 1 << 20) + b"\x80" * 4096)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().feeds(epoch, indices, guard, keys)


def test_a_worker_killed_half_way_through_a_result_raises_within_seconds(tmp_path):
    small_scene_folder(tmp_path, lines=8, samples=9, bands=4)
    mod = _DiesSendingHalfAResult(tmp_path, seed=0, patch_size=3)
    plan = EpochPlan(len(mod), 8, seed=0, shuffle=False)
    guard = SampleGuard("raise")
    engine = DaliEngine(mod, plan, device=torch.device("cpu"),
                        config=load_config({"py_num_workers": 2}), guard=guard)
    loader = Loader(engine, plan, guard, modality=mod, device=torch.device("cpu"),
                    backend="dali")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(WorkerDied, match=r"epoch 0, batch 0: a feed worker process died"):
        _bounded(lambda: list(loader), seconds=30)
    assert engine._pool is None  # the pool was closed; no worker of it is left
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    mod.fatal = -1  # (the next workers fork from this process: they see the change)
    assert _indices(_bounded(lambda: list(loader))) == list(range(len(mod)))
    loader.close()


def test_a_worker_killed_at_any_moment_never_hangs_the_pool(tmp_path):
    """SIGKILL at random moments of preparing and sending multi-MiB results: each wait
    ends, with the result (sent in full before the kill) or WorkerDied."""
    small_scene_folder(tmp_path, lines=40, samples=40, bands=16)
    mod = HyperspectralModality(tmp_path, seed=0, patch_size=31)
    indices = np.arange(48, dtype=np.int64)
    rng = np.random.default_rng(0)
    outcomes = []
    for delay in rng.uniform(0.0, 0.08, size=6):
        pool = feeders.FeedPool(mod, "raise", 1)
        kill = threading.Timer(delay, os.kill, (pool.pids()[0], signal.SIGKILL))
        try:
            ticket = pool.submit(feeders.PlanBatch(0, 0, indices, indices), {})
            kill.start()
            try:
                prepared, _ = _bounded(functools.partial(pool.result, ticket), seconds=20)
                outcomes.append(len(prepared.kept))
            except WorkerDied:
                outcomes.append("died")
        finally:
            kill.join()  # (the worker is still there to be killed: close() reaps it)
            pool.close()
    assert "died" in outcomes and set(outcomes) <= {"died", 48}, outcomes


_KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
import psutil
import torchvision.io, torchvision.transforms.v2.functional
from torch_bridge import make_loader
loader = make_loader("image", Path(sys.argv[1]), backend="torch", batch_size=4, size=16,
                     reference={"num_workers": 2})
before = {p.pid for p in psutil.Process().children()}
it = iter(loader)
next(it)
workers = sorted({p.pid for p in psutil.Process().children()} - before)
assert len(workers) == 2, workers
os.kill(workers[0], signal.SIGKILL)
try:
    list(it)
except RuntimeError as exc:
    print("raised:", workers[0], exc)
print("next pass:", sum(len(b["index"]) for b in loader))
"""


def test_a_killed_dataloader_worker_fails_the_pass(image_folder):
    """The torch backend's waits: DataLoader checks its workers are alive while it waits
    (a SIGCHLD handler, and every 5 s), so a killed worker fails the pass instead of
    hanging it; the next pass starts new workers. (A process of its own: torch's SIGCHLD
    handler runs in the main thread.)"""
    run = subprocess.run([sys.executable, "-c", _KILL_SCRIPT, str(image_folder)], cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                         text=True, timeout=120)  # hang guard
    assert run.returncode == 0, run.stderr[-3000:]
    raised, after = run.stdout.strip().splitlines()[-2:]
    pid = raised.split()[1]
    assert re.match(rf"raised: {pid} DataLoader worker \(pid\(?s?\)? {pid}", raised), raised
    assert after == "next pass: 37"


# 15.3: a /dev/shm too small for the torch backend's batches -------------------------------

_SHM_SCRIPT = """
import sys
from pathlib import Path
from tests.conftest import write_image_folder
from torch_bridge import make_loader
root = write_image_folder(Path(sys.argv[1]), n_images=16, n_classes=2)
loader = make_loader("image", root, backend="torch", batch_size=8, size=96,
                     reference={"num_workers": 2})
print(sum(1 for _ in loader))
"""


def _can_mount_private_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c",
                            "mount -t tmpfs -o size=256k tmpfs /dev/shm"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_tiny_dev_shm_raises_naming_it_and_the_fixes(tmp_path):
    """A 256 KiB /dev/shm (a private mount namespace, as small containers have) is smaller
    than one batch: torch's queue thread used to print the error and the pass waited
    forever; now the consumer raises SharedMemoryError."""
    if not _can_mount_private_tmpfs():
        pytest.skip("needs `unshare -m` and permission to mount a tmpfs")
    command = ("mount -t tmpfs -o size=256k tmpfs /dev/shm && "
               f"exec {sys.executable} -c \"$0\" \"$1\"")
    run = subprocess.run(["unshare", "-m", "sh", "-c", command, _SHM_SCRIPT,
                          str(tmp_path / "d")], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=180)
    assert run.returncode != 0, run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("torch_bridge.errors.SharedMemoryError"), run.stderr[-3000:]
    for needed in ("/dev/shm", "MiB free", "--shm-size", "fewer workers",
                   "set_sharing_strategy('file_system')"):
        assert needed in last, last


# 15.7: one live iterator per loader -------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_iter_restarts_the_pass_and_the_first_iterator_raises(image_folder,
                                                                       backend):
    loader = _image_loader(image_folder, backend, batch_size=8, seed=3)
    expected = _indices(_image_loader(image_folder, "dali", batch_size=8, seed=3))
    first = iter(loader)
    head = next(first)["index"].tolist()
    second = iter(loader)
    again = next(second)["index"].tolist()
    assert again == head == expected[:8]  # the pass started over
    with pytest.raises(RuntimeError, match="superseded"):
        next(first)
    assert _indices([{"index": torch.tensor(again)}] + list(second)) == expected
    assert loader.epoch == 1  # one pass, counted once
    assert _indices(loader) != expected and loader.epoch == 2
    loader.close()


def test_an_abandoned_iterator_does_not_hold_the_loader(image_folder):
    loader = _image_loader(image_folder, "dali", batch_size=8, shuffle=False)
    next(iter(loader))  # dropped at once
    loader.set_epoch(0)
    assert _indices(loader) == list(range(37))
    it = iter(loader)
    next(it)
    it.close()
    loader.set_epoch(5)  # another epoch chosen while an iterator is live: that one runs
    live = iter(loader)
    assert next(live) is not None and loader.epoch == 5
    loader.close()


# 15.13: every DDP rank yields len(loader) batches -----------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_with_a_wholly_skipped_batch_yields_it_empty(tmp_path, backend):
    """10 files, 2 ranks, batch 2, no shuffle: rank 0 reads [0, 2], [4, 6], [8]; 4 and 6
    are empty files, so its second batch is empty (with the fields of the others)."""
    root = write_image_folder(tmp_path / "d", n_images=10, n_classes=1)
    for i in (4, 6):
        (root / "class_0" / f"img_{i:04d}.jpg").write_bytes(b"")
    ranks = [_image_loader(root, backend, batch_size=2, shuffle=False, on_error="skip",
                           rank=r, world_size=2) for r in (0, 1)]
    passes = [_bounded(lambda loader=loader: list(loader)) for loader in ranks]
    assert [len(p) for p in passes] == [len(ranks[0]), len(ranks[1])] == [3, 3]
    full, empty = passes[0][0], passes[0][1]
    assert empty.keys() == full.keys() and empty["index"].shape == (0,)
    for name, tensor in empty.items():
        assert tensor.shape == (0, *full[name].shape[1:]) and tensor.dtype == full[name].dtype
    assert [s.index for s in ranks[0].skipped] == [4, 6]
    assert [b["index"].tolist() for b in passes[1]] == [[1, 3], [5, 7], [9]]
    for loader in ranks:
        loader.close()


def test_an_empty_batch_before_any_real_one_follows_the_schema(tmp_path):
    root = write_image_folder(tmp_path / "d", n_images=6, n_classes=1)
    for i in (0, 2):
        (root / "class_0" / f"img_{i:04d}.jpg").write_bytes(b"")
    loader = _image_loader(root, "dali", batch_size=2, shuffle=False, on_error="skip",
                           rank=0, world_size=2)
    empty, full = list(loader)[:2]
    assert {k: (tuple(v.shape), v.dtype) for k, v in empty.items()} == {
        "image": ((0, 0, 0, 0), torch.float32), "label": ((0,), torch.int64),
        "index": ((0,), torch.int64)}
    assert full["index"].tolist() == [4]
    loader.close()
