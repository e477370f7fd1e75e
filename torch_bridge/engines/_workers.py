"""Starting and stopping worker processes (DataLoader workers, feed workers) beside DALI.

Start method: "fork" is the fastest and needs nothing picklable, but a process that has
initialised CUDA must not fork (the child inherits a CUDA context it cannot use, and any
CUDA call there fails or hangs). `start_method()` therefore picks "fork" only while CUDA is
not initialised in this process, and "forkserver" (else "spawn") after: the work (dataset,
modality) is then pickled into the workers, and a script needs an
`if __name__ == "__main__":` guard, as with any spawned worker.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import time
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader

from torch_bridge.errors import SharedMemoryError


def start_method(*, cuda_in_use: bool = False) -> str:
    """"fork" while neither torch nor the caller (`cuda_in_use`, e.g. a DALI GPU pipeline)
    has initialised CUDA in this process; "forkserver" (or "spawn") otherwise."""
    methods = multiprocessing.get_all_start_methods()
    if not cuda_in_use and not torch.cuda.is_initialized() and "fork" in methods:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


@contextmanager
def frozen_gc():
    """Fork inside this block: the children never collect what the parent holds.

    A forked child inherits the parent's unreachable objects (DALI pipelines hold reference
    cycles); were it to collect a Pipeline, the destructor would join DALI threads that do
    not exist in the child and the worker would crash. Frozen objects are never collected
    in the child; the parent unfreezes them at once (gc.freeze is O(1)).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def start_workers(loader: DataLoader):
    """`iter(loader)`, starting its workers (when it does) safely.

    A DataLoader without an explicit `multiprocessing_context` gets `start_method()`, chosen
    again at every start (CUDA may have been initialised since the last one); forking
    happens with the collector frozen (`frozen_gc`).
    """
    if loader.num_workers == 0:
        return iter(loader)
    kept = getattr(loader, "_iterator", None)  # persistent workers from the last pass
    if kept is not None and not all(w.is_alive() for w in getattr(kept, "_workers", ())):
        stop_workers(loader)  # one died since (its pass failed): start them all afresh
    if loader.multiprocessing_context is None or getattr(loader, "_auto_start_method", False):
        loader.multiprocessing_context = start_method()
        loader._auto_start_method = True
    with frozen_gc():
        return iter(loader)


def stop_workers(loader: DataLoader | None) -> None:
    """Shut a DataLoader's (persistent) workers down now.

    Left to a garbage collection (an aborted pass held by a traceback), the workers'
    queues can be finalized before the iterator, and each worker then takes 5 s to time out.
    """
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        try:
            iterator._shutdown_workers()
        except (AssertionError, OSError):  # its state was broken by a worker that died
            for worker in getattr(iterator, "_workers", ()):
                if worker.is_alive():
                    worker.kill()
                worker.join(5.0)
    if loader is not None:
        loader._iterator = None


def dead_workers(loader: DataLoader, *, wait_s: float = 1.0) -> str:
    """'pid N, exit code C' of each worker of `loader`'s live iterator that has died, or ''
    when none has within `wait_s` (a worker's sockets reset a moment before its death can
    be seen): the liveness check behind an error from torch's queues."""
    workers = list(getattr(getattr(loader, "_iterator", None), "_workers", ()))
    deadline = time.monotonic() + wait_s
    while workers:
        dead = [w for w in workers if not w.is_alive()]
        if dead or time.monotonic() >= deadline:
            return ", ".join(f"pid {w.pid}, exit code {w.exitcode}" for w in dead)
        time.sleep(0.02)
    return ""


def shm_advice(exc: BaseException, workers: int, shm: str = "/dev/shm") -> SharedMemoryError:
    """A SharedMemoryError naming `shm`, its free space and the fixes.

    Args:
        exc: a batch that did not fit, or a worker killed by SIGBUS writing into `shm`.
        workers: the DataLoader's worker count (named in the message).
        shm: the shared-memory mount.

    Returns:
        the error to raise (from `exc`)
    """
    try:
        stat = os.statvfs(shm)
        space = (f"{stat.f_bavail * stat.f_frsize / 2**20:.1f} MiB free of "
                 f"{stat.f_blocks * stat.f_frsize / 2**20:.1f} MiB")
    except OSError as stat_exc:
        space = f"not readable: {stat_exc}"
    return SharedMemoryError(
        f"the torch backend's {workers} DataLoader worker(s) hand batches over through "
        f"shared memory in {shm} ({space}), and it is full: {exc}. Give the container "
        f"more (docker run --shm-size=8g; Kubernetes: an emptyDir with medium: Memory "
        f"mounted at {shm}), use fewer workers or a smaller prefetch_factor "
        f"(reference={{'num_workers': ..., 'prefetch_factor': ...}}), or call "
        f"torch.multiprocessing.set_sharing_strategy('file_system') before making the "
        f"loader")
