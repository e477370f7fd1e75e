"""Soak and shutdown for every modality on both backends.

Many epochs over tiny data keep open file descriptors, threads, memory and worker processes
flat after warm-up; close(), dropping the loader, and leaving the interpreter with loaders
still open leave no child process behind.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

# The decoders the torch backend's workers import on first use: imported here, forked
# workers inherit them instead of each paying seconds to import them.
import torchvision.io  # noqa: F401
import torchvision.transforms.v2.functional  # noqa: F401

from tests.conftest import BACKENDS, MODALITY_KINDS

EPOCHS, WARMUP = 100, 3
RSS_SLACK = 64 * 2**20  # generous: tiny batches, so only a gross leak (a pipeline per
FD_SLACK = 2            # epoch, a batch queue that grows) would cross it
REPO = Path(__file__).resolve().parents[2]
SETTLE_S = 30.0  # the longest wait for exiting workers and closing pipes (a loaded machine)


def _children() -> set[tuple[int, float]]:
    """(pid, start time) of every live descendant of this process."""
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found.add((child.pid, child.create_time()))
        except psutil.NoSuchProcess:
            pass
    return found


def _rss(processes) -> int:
    total = 0
    for pid, _ in processes:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _fds() -> dict[int, str]:
    """This process's open file descriptors and what each points at."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return found


def _snapshot() -> dict:
    gc.collect()
    children = _children()
    fds = _fds()
    return {"fds": len(fds), "targets": fds, "children": children,
            "rss": psutil.Process().memory_info().rss + _rss(children)}


def _settled(done) -> dict:
    """The first snapshot for which `done(snapshot)` holds, waiting up to SETTLE_S: worker
    processes that were told to stop take a while to exit on a loaded machine, and their
    pipes close when they have. What is checked stays the same; only the wait is bounded."""
    deadline = time.monotonic() + SETTLE_S
    snapshot = _snapshot()
    while not done(snapshot) and time.monotonic() < deadline:
        time.sleep(0.1)
        snapshot = _snapshot()
    return snapshot


def _new_fds(before: dict, after: dict) -> list[str]:
    """The descriptors open in `after` but not in `before` (for failure messages)."""
    old = set(before["targets"].items())
    return sorted(f"{fd} -> {target}" for fd, target in after["targets"].items()
                  if (fd, target) not in old)


def _loader(data, backend, workers=1, **overrides):
    if backend == "torch":  # with persistent worker processes: part of what must not leak
        overrides.setdefault("reference", {"num_workers": workers})
    return data.loader(backend, **overrides)


@pytest.fixture(params=MODALITY_KINDS)
def data(request, tiny_data):
    return tiny_data(request.param)


def _soak(data, backend, epochs):
    loader = _loader(data, backend)
    everything = list(range(loader.plan.num_samples))
    marks = {}
    for epoch in range(1, epochs + 1):
        seen = sorted(i for batch in loader for i in batch["index"].tolist())
        assert seen == everything, f"epoch {epoch - 1}"
        if epoch == WARMUP:
            marks[epoch] = _snapshot()
        elif epoch == epochs:
            warm = marks[WARMUP]
            marks[epoch] = _settled(lambda s, limit=warm["fds"] + FD_SLACK: s["fds"] <= limit)
    loader.close()
    warm, end = marks[WARMUP], marks[epochs]
    assert end["fds"] <= warm["fds"] + FD_SLACK, _new_fds(warm, end)
    assert end["rss"] <= warm["rss"] + RSS_SLACK, (warm["rss"] / 2**20, end["rss"] / 2**20)
    assert end["children"] == warm["children"]  # persistent workers: the same processes
    if backend == "torch":
        assert len(warm["children"]) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_epochs_keep_descriptors_memory_and_workers_flat(data, backend):
    _soak(data, backend, EPOCHS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_and_del_leave_no_child_processes_or_threads(data, backend):
    before = _snapshot()
    threads = psutil.Process().num_threads()
    loader = _loader(data, backend, workers=2)
    it = iter(loader)
    next(it)  # mid-epoch: workers busy, batches in flight
    if backend == "torch":
        assert len(_children() - before["children"]) == 2
    loader.close()
    assert _children() == before["children"]
    del it  # the interrupted pass (its generator holds the old worker queues' pipes)
    closed = _settled(lambda s: s["children"] == before["children"]
                      and s["fds"] <= before["fds"])
    assert closed["children"] == before["children"]
    assert closed["fds"] <= before["fds"], _new_fds(before, closed)  # memory maps closed too
    total = loader.plan.num_samples  # a closed loader starts again on the next pass
    assert sorted(i for b in loader for i in b["index"].tolist()) == list(range(total))
    dropped = _loader(data, backend, workers=2)
    it = iter(dropped)
    next(it)
    engine = dropped._engine  # outlives its loader (as anything holding it would make it)
    del loader, dropped, it  # never closed: collecting the loader closes its engine
    after = _settled(lambda s: s["children"] == before["children"]
                     and s["fds"] <= before["fds"])
    assert after["children"] == before["children"]
    assert after["fds"] <= before["fds"], _new_fds(before, after)
    if backend == "dali":  # (torch starts its own thread pools lazily, once per process)
        assert psutil.Process().num_threads() <= threads  # DALI's went with the pipelines
    del engine


_EXIT_SCRIPT = """
import json, sys
from pathlib import Path
import psutil
import torchvision.io, torchvision.transforms.v2.functional
from tests.conftest import TinyData

held = []
for kind, path in json.loads(sys.argv[1]):
    data = TinyData(kind, Path(path), [])
    for backend, extra in (("torch", {"reference": {"num_workers": 2}}), ("dali", {})):
        loader = data.loader(backend, **extra)
        it = iter(loader)
        next(it)
        held.append((loader, it))
children = psutil.Process().children(recursive=True)
print(json.dumps([[p.pid, p.create_time()] for p in children]), flush=True)
# and exit with every loader open, mid-epoch
"""


def test_exit_with_open_loaders_leaves_no_children(tiny_data):
    """A script that leaves loaders open (torch workers running, DALI batches in flight)
    exits by itself, cleanly, and its worker processes exit with it."""
    spec = [[kind, str(tiny_data(kind).one)] for kind in ("image", "video", "hyperspectral")]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, json.dumps(spec)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)  # hang guard
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr, \
        run.stderr[-3000:]
    workers = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(workers) == 2 * len(spec)
    alive = []
    for pid, created in workers:
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                alive.append((pid, process.cmdline()))
        except psutil.NoSuchProcess:
            pass
    assert alive == []
