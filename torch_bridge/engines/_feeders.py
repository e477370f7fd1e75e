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

Processes (engines._feed_pool): `start_method()` (engines._workers): fork, with
the collector frozen, while CUDA is not initialised in the parent; forkserver or spawn
after, which pickles the modality into the workers (every built-in modality pickles:
sources reopen their memory maps and caches per process). A worker that dies (SIGKILL, the
OOM killer), even half-way through sending a result, is seen within a fraction of a
second and raised as `WorkerDied` when its batch's turn comes. Workers exit on `close()`,
when the pool is garbage-collected (the engine's finalizer), at interpreter exit (daemon
processes), and by themselves when the process that started them dies (a watchdog thread).
"""
from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from torch_bridge.engines._feed_pool import ProcessPool, Ticket
from torch_bridge.errors import SampleGuard, Skipped, WorkerDied

__all__ = ["FeedPool", "FeedWindow", "PlanBatch", "Prepared", "WorkerDied"]

_worker: dict = {}  # in a worker process only: the modality, on_error and result pipe


def in_feed_worker() -> bool:
    """Whether this process is a feed worker (one of py_num_workers)."""
    return bool(_worker)


@dataclass(frozen=True)
class PlanBatch:
    """One plan batch: its epoch, its position in the epoch, its dataset indices and their
    augmentation keys (torch_bridge.order.plan)."""

    epoch: int
    position: int
    indices: np.ndarray = field(repr=False)
    keys: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Prepared:
    """A plan batch's feeds: the graph inputs of the samples kept, their int64 dataset
    indices (empty: every sample was skipped) and the skip records made while reading
    (recorded in the guard when the batch is consumed)."""

    feeds: dict = field(repr=False)
    kept: np.ndarray
    skips: tuple[Skipped, ...] = ()


Outcome = Prepared | Exception  # an exception: raised when the batch's turn comes


class FeedPool:
    """`workers` processes running `modality.feeds(epoch, indices, guard, keys)`.

    `context`: a start method name, or None for `start_method(cuda_in_use=...)`. The pool
    starts its processes at once (forked inside `frozen_gc()`), so create it at a point where
    forking is safe: before a DALI pipeline is built, or with its threads idle.
    """

    def __init__(self, modality, on_error: str, workers: int, *, context: str | None = None,
                 cuda_in_use: bool = False):
        if workers < 1:
            raise ValueError(f"a FeedPool needs at least one worker, got {workers}")
        self.workers = workers
        pool: ProcessPool | None = None
        try:
            pool = ProcessPool(_prepare, (_init, modality, on_error), workers,
                               method=context, cuda_in_use=cuda_in_use)
            for ticket in [pool.submit(None) for _ in range(workers)]:
                pool.result(ticket)  # every worker started and answers
        except Exception as exc:  # unpicklable modality, failed start: say what to do
            method = pool.method if pool else context or "the start method"
            if pool is not None:
                pool.close()
            raise RuntimeError(
                f"feed workers (py_num_workers={workers}) could not start with "
                f"{method!r}: {type(exc).__name__}: {exc}. With forkserver or spawn "
                f"(CUDA is initialised in this process) the modality is pickled into the "
                f"workers and must be picklable; py_num_workers=0 prepares the feeds in "
                f"this process") from exc
        self._pool: ProcessPool = pool
        self.method = pool.method

    def submit(self, batch: PlanBatch, known_bad: dict[int, str]) -> Ticket:
        """Send one plan batch, with the main guard's known-bad entries for its indices.

        Returns:
            a Ticket for `result`
        """
        return self._pool.submit((batch, known_bad))

    def result(self, ticket: Ticket) -> tuple[Prepared, dict[int, str]]:
        """(the batch's Prepared, {index: reason} of the samples its worker found bad).

        Raises:
            the worker's exception (SampleError under on_error="raise"), or WorkerDied.
        """
        return self._pool.result(ticket)

    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return self._pool.pids()

    def close(self) -> None:
        """End every worker (work in progress is dropped)."""
        self._pool.close()


class FeedWindow:
    """Plan batches sent ahead to a FeedPool (up to twice its workers), taken back strictly
    in plan order; a batch whose samples' known-bad entries changed since it was sent is
    prepared again in this process (see the module doc)."""

    def __init__(self, pool: FeedPool, guard: SampleGuard):
        self.pool, self.guard = pool, guard
        self._sent: deque[tuple[PlanBatch, dict[int, str], Ticket]] = deque()

    def take(self, stream: Iterator[PlanBatch], prepare_here: Callable[[PlanBatch], Prepared]
             ) -> tuple[PlanBatch, Outcome] | None:
        """The stream's next batch and its outcome (a Prepared, or the exception preparing
        it raised), or None at the stream's end."""
        self._fill(stream)
        if not self._sent:
            return None
        batch, bad, ticket = self._sent.popleft()
        try:
            if self.guard.known_bad_for(batch.indices) != bad:  # a sample went bad since
                return batch, prepare_here(batch)  # (the worker's answer is dropped)
            prepared, new_bad = self.pool.result(ticket)
        except WorkerDied as exc:
            self._sent.clear()
            return batch, exc
        except Exception as exc:
            return batch, exc
        self.guard.remember_bad(new_bad)
        return batch, prepared

    def _fill(self, stream: Iterator[PlanBatch]) -> None:
        while len(self._sent) < 2 * self.pool.workers:
            batch = next(stream, None)
            if batch is None:
                return
            bad = self.guard.known_bad_for(batch.indices)
            self._sent.append((batch, bad, self.pool.submit(batch, bad)))

    def clear(self) -> None:
        """Forget what was sent (answers still to come are read and dropped later)."""
        self._sent.clear()


def _init(results, modality, on_error: str) -> None:
    _worker.update(modality=modality, on_error=on_error, results=results)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process shuts us down
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()


def _exit_with(ppid: int) -> None:
    """End this worker once the process that started it (the main process, or the
    forkserver, which ends with it) is gone: no orphans if it dies without closing."""
    while os.getppid() == ppid:
        time.sleep(1.0)
    os._exit(0)


def _prepare(task) -> tuple[Prepared, dict[int, str]] | int:
    """A worker's work: (Prepared, newly found bad samples) of one plan batch; the
    process id for the start-up check (task None)."""
    if task is None:
        return os.getpid()
    batch, known_bad = task
    guard = SampleGuard(_worker["on_error"])
    guard.remember_bad(known_bad)
    try:
        feeds, kept = _worker["modality"].feeds(batch.epoch, batch.indices, guard, batch.keys)
    except Exception as exc:
        raise _portable(exc) from None
    new_bad = {i: r for i, r in guard.known_bad.items() if known_bad.get(i) != r}
    return Prepared(feeds, np.asarray(kept, np.int64), tuple(guard.skipped)), new_bad


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling into the main process (SampleError does), else a
    RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # an exception class that cannot be rebuilt from its args
        return RuntimeError(f"{type(exc).__name__}: {exc}")
