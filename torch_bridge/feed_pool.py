"""Feed worker processes with one task pipe and one result pipe each, never waited on blindly.

Why not `concurrent.futures.ProcessPoolExecutor`: all its workers write results into one
shared pipe under one lock. A worker killed (SIGKILL, the OOM killer) half-way through
writing a result leaves a partial message there: the executor's thread blocks forever
reading the rest of it (every process forked since holds a copy of the pipe's write end,
so no end-of-file ever comes), the engine waits forever on the future, and so does the
interpreter at exit, which joins that thread.

Here each worker has its own pipes; the parent reads a worker's results without blocking
(its own framing: an 8-byte length, then the pickled result) and, while a result is
incomplete, waits on the result pipe *and* the worker's process sentinel with a timeout. A
worker that dies, before or while sending, is therefore seen at once and reported as
`WorkerDied`; a partial result is dropped with its worker. Batches go to the workers in
turn (round robin) and each worker answers in the order it was given work, so results
are read strictly in the order they were submitted.
"""
from __future__ import annotations

import itertools
import os
import pickle
import struct
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import wait

from torch_bridge.errors import WorkerDied
from torch_bridge.workers import frozen_gc, start_method

_HEADER = struct.Struct("<Q")
_CHUNK = 1 << 20


@dataclass
class _Worker:
    process: object
    tasks: object  # the parent's sending end of the task pipe
    results: object  # the parent's receiving end of the result pipe (read non-blocking)
    buffer: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def frame(self) -> bytes | None:
        """The first complete result in the buffer, taken out of it, or None."""
        if len(self.buffer) < _HEADER.size:
            return None
        size = _HEADER.unpack_from(self.buffer)[0]
        end = _HEADER.size + size
        if len(self.buffer) < end:
            return None
        payload = bytes(self.buffer[_HEADER.size:end])
        del self.buffer[:end]
        return payload

    def read_available(self) -> bool:
        """Move what the result pipe holds now into the buffer; False at end of file."""
        while True:
            try:
                chunk = os.read(self.results.fileno(), _CHUNK)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.buffer += chunk


@dataclass(frozen=True)
class Ticket:
    """A submitted task: which worker runs it and its id there."""

    worker: int
    task: int


class ProcessPool:
    """`workers` processes running `target(task)` for each submitted task (picklable)."""

    def __init__(self, target, init_args: tuple, workers: int, *, method: str | None = None,
                 cuda_in_use: bool = False, poll_s: float = 0.25):
        if workers < 1:
            raise ValueError(f"a feed pool needs at least one worker, got {workers}")
        self.method = method or start_method(cuda_in_use=cuda_in_use)
        self.poll_s = poll_s
        self._ids = itertools.count()
        self._turn = itertools.cycle(range(workers))
        self._waiting: list[deque[int]] = [deque() for _ in range(workers)]
        self._workers: list[_Worker] = []
        context = get_context(self.method)
        try:
            with frozen_gc():  # fork: the children never collect what this process holds
                for _ in range(workers):
                    self._workers.append(_spawn(context, target, init_args))
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [w.process.pid for w in self._workers]

    def submit(self, task) -> Ticket:
        """Send `task` to the next worker in turn.

        Returns:
            the Ticket to pass to `result`
        """
        position = next(self._turn)
        task_id = next(self._ids)
        try:
            self._workers[position].tasks.send((task_id, task))
        except (OSError, ValueError) as exc:  # the pipe is gone: the worker is
            raise self._died(position, "while being sent work") from exc
        self._waiting[position].append(task_id)
        return Ticket(position, task_id)

    def result(self, ticket: Ticket):
        """What the task of `ticket` returned (its exception is raised here). Results of
        earlier tasks of that worker not asked for (abandoned) are read and dropped.

        Raises:
            WorkerDied: the worker died before its result was complete (seen within
                `poll_s` of its death).
        """
        queue = self._waiting[ticket.worker]
        if ticket.task not in queue:
            raise ValueError(f"task {ticket.task} was already taken or never submitted")
        while True:
            task_id, ok, value = pickle.loads(self._next_frame(ticket.worker))
            queue.remove(task_id)
            if task_id == ticket.task:
                if ok:
                    return value
                raise value

    def _next_frame(self, position: int) -> bytes:
        worker = self._workers[position]
        while (payload := worker.frame()) is None:
            ready = wait([worker.results, worker.process.sentinel], timeout=self.poll_s)
            open_ = worker.read_available()
            if (payload := worker.frame()) is not None:
                return payload
            if not open_ or worker.process.sentinel in ready or not worker.process.is_alive():
                raise self._died(position, f"with {len(worker.buffer)} bytes of a result "
                                           f"received" if worker.buffer else
                                 "before sending its result")
        return payload

    def _died(self, position: int, when: str) -> WorkerDied:
        process = self._workers[position].process
        process.join(self.poll_s)
        return WorkerDied(
            f"a feed worker process died (pid {process.pid}, exit code {process.exitcode}: "
            f"killed, out of memory or crashed in native code) {when}, while preparing a "
            f"batch; iterating again starts new workers")

    def close(self) -> None:
        """End every worker now (work in progress is dropped) and close the pipes."""
        for worker in self._workers:
            if worker.closed:
                continue
            worker.closed = True
            if worker.process.is_alive():
                worker.process.terminate()
            worker.process.join(5.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5.0)
            worker.tasks.close()
            worker.results.close()


def _spawn(context, target, init_args: tuple) -> _Worker:
    task_r, task_w = context.Pipe(duplex=False)
    result_r, result_w = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(task_r, result_w, target, init_args),
                              daemon=True, name="feed-worker")
    try:
        process.start()
    finally:
        task_r.close()
        result_w.close()
    os.set_blocking(result_r.fileno(), False)
    return _Worker(process, task_w, result_r)


def _serve(tasks, results, target, init_args: tuple) -> None:
    """A worker's loop: run each task, write (task id, ok, result or exception)."""
    init, init_rest = init_args[0], init_args[1:]
    init(results, *init_rest)
    fd = results.fileno()
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        task_id, task = message
        try:
            reply = (task_id, True, target(task))
        except Exception as exc:
            reply = (task_id, False, exc)
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result or exception: say so instead
            failed = RuntimeError(f"a feed worker could not send its result: "
                                  f"{type(exc).__name__}: {exc}")
            payload = pickle.dumps((task_id, False, failed))
        _write_all(fd, _HEADER.pack(len(payload)))
        _write_all(fd, payload)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
