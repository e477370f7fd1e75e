"""Feed workers: a modality's `feeds()` for upcoming plan batches, in worker processes.

With `PipelineConfig.py_num_workers = N > 0`, `DaliEngine` hands the Python side of each
plan batch (memmap patch reads, PyAV decoding or remuxing, IMU reading and alignment) to N
processes, a window of batches ahead, and takes the results strictly in plan order, so the
reading overlaps DALI's work and the training step. The engine still feeds DALI itself
(`feed_input` + `schedule_run`), so everything it guarantees stays as with N = 0: it knows
which plan batch each output belongs to (exact resume, counting batches yielded), it runs
ahead across the end of an epoch, it drains or drops work for passes that do not happen,
and it re-decodes a batch that fails inside DALI sample by sample from the inputs it fed.

Why not DALI's own parallel external_source (`fn.external_source(source=cb, parallel=True,
batch=True)` with `py_num_workers`): (1) its callback only learns DALI's iteration number
and epoch count, and the callable is fixed when the pipeline is built and its workers
start, so every resume point, `set_epoch` or restart after a skipped failure would need a
new pipeline and new worker processes; (2) an epoch ends with StopIteration and the next
needs `pipe.reset()`, which ends running ahead across epochs; (3) skip records and known-bad
samples (`SampleGuard`) cannot travel between the main process and its workers except as
extra pipeline outputs, and a sample found bad by blame in the main process cannot reach the
workers at all; (4) blame needs a failed batch's inputs in the main process, which DALI's
workers never hand back; (5) parallel sources must be declared with `source=` in the graph
builders, which take named inputs fed by the engine and know nothing of plans or guards.

Exactness: a worker runs `feeds()` under its own `SampleGuard` holding the main guard's
known-bad entries for the batch's indices when the batch was sent; it returns the feeds,
the kept indices, its skip records and the samples it found bad. When the engine takes the
batch, it checks that those entries have not changed since (a sample failing in an earlier
batch, or blamed after a DALI failure); if they have, it prepares that batch again in the
main process. The result is what N = 0 computes at the same point, so batches, skips,
`loader.skipped` and the known-bad bookkeeping are identical. Under on_error="raise" the
worker's SampleError (file and index in its message) is re-raised by the engine when the
batch's turn comes, after every earlier batch, as N = 0 raises it.

Processes: `start_method()` (torch_bridge.workers): fork, with the collector frozen, while
CUDA is not initialised in the parent; forkserver or spawn after, which pickles the modality
into the workers (every built-in modality pickles: sources reopen their memory maps and
caches per process). Workers exit on `close()`, when the pool is garbage-collected (the
engine's finalizer), at interpreter exit (concurrent.futures joins them), and by themselves
when the process that started them dies (a watchdog thread).
"""
from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

import numpy as np

from torch_bridge.errors import SampleGuard
from torch_bridge.workers import frozen_gc, start_method

__all__ = ["BrokenProcessPool", "FeedPool", "known_bad_for"]

_worker: dict = {}  # in a worker process only: the modality and on_error, set by _init


class FeedPool:
    """`workers` processes running `modality.feeds(epoch, indices, guard)`.

    `context`: a start method name, or None for `start_method(cuda_in_use=...)`. The pool
    starts its processes at once (forked inside `frozen_gc()`), so create it at a point where
    forking is safe: before a DALI pipeline is built, or with its threads idle.
    """

    def __init__(self, modality, on_error: str, workers: int, *, context: str | None = None,
                 cuda_in_use: bool = False):
        if workers < 1:
            raise ValueError(f"a FeedPool needs at least one worker, got {workers}")
        self.method = context or start_method(cuda_in_use=cuda_in_use)
        self.workers = workers
        self._executor = ProcessPoolExecutor(
            workers, mp_context=get_context(self.method), initializer=_init,
            initargs=(modality, on_error))
        try:
            with frozen_gc():  # fork: every worker starts now; forkserver/spawn: one now
                self._executor.submit(os.getpid).result()
        except Exception as exc:  # unpicklable modality, failed start: say what to do
            self._executor.shutdown(wait=True, cancel_futures=True)
            raise RuntimeError(
                f"feed workers (py_num_workers={workers}) could not start with "
                f"{self.method!r}: {type(exc).__name__}: {exc}. With forkserver or spawn "
                f"(CUDA is initialised in this process) the modality is pickled into the "
                f"workers and must be picklable; py_num_workers=0 prepares the feeds in "
                f"this process") from exc

    def submit(self, epoch: int, indices: np.ndarray, keys: np.ndarray,
               known_bad: dict[int, str]) -> Future:
        """A future of (feeds, kept int64 indices, skip records, {index: reason} of the
        samples found bad) for one plan batch (its indices and augmentation keys), given the
        main guard's known-bad entries for its indices."""
        return self._executor.submit(_prepare, epoch, indices, keys, known_bad)

    def pids(self) -> list[int]:
        """The worker processes' ids (those started so far)."""
        return [p.pid for p in list((self._executor._processes or {}).values())]

    def close(self) -> None:
        """Cancel queued work, wait for running batches and join every worker."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def known_bad_for(guard: SampleGuard, indices: np.ndarray) -> dict[int, str]:
    """The guard's known-bad entries for these indices (what a worker's guard must know)."""
    bad = guard.known_bad
    if not bad:
        return {}
    return {i: bad[i] for i in indices.tolist() if i in bad}


def _init(modality, on_error: str) -> None:
    _worker.update(modality=modality, on_error=on_error)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process shuts us down
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()


def _exit_with(ppid: int) -> None:
    """End this worker once the process that started it (the main process, or the
    forkserver, which ends with it) is gone: no orphans if it dies without closing."""
    while os.getppid() == ppid:
        time.sleep(1.0)
    os._exit(0)


def _prepare(epoch: int, indices: np.ndarray, keys: np.ndarray,
             known_bad: dict[int, str]) -> tuple:
    guard = SampleGuard(_worker["on_error"])
    guard.known_bad.update(known_bad)
    try:
        feeds, kept = _worker["modality"].feeds(epoch, indices, guard, keys)
    except Exception as exc:
        raise _portable(exc) from None
    new_bad = {i: r for i, r in guard.known_bad.items() if known_bad.get(i) != r}
    return feeds, np.asarray(kept, np.int64), list(guard.skipped), new_bad


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling into the main process (SampleError does), else a
    RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # an exception class that cannot be rebuilt from its args
        return RuntimeError(f"{type(exc).__name__}: {exc}")

