"""Feed worker processes with one task pipe and one result pipe each, never waited on blindly.

Why not `concurrent.futures.ProcessPoolExecutor`: all its workers write results into one
shared pipe under one lock. A worker killed (SIGKILL, the OOM killer) half-way through
writing a result leaves a partial message there: the executor's thread blocks forever
reading the rest of it (every process forked since holds a copy of the pipe's write end,
so no end-of-file ever comes), the engine waits forever on the future, and so does the
interpreter at exit, which joins that thread.

Here each worker has its own pipes. A reader thread moves results out of the result pipes
as they come (so a worker never waits for the engine to ask before it starts its next
batch), reading without blocking (its own framing: an 8-byte length, then the pickled
result), so a partial result never blocks it. The engine waits for a result with a
timeout, checking the worker's process each time: a worker that dies, before or while
sending, is seen within a fraction of a second and reported as `WorkerDied`; a partial
result is dropped with its worker. Batches go to the workers in
turn (round robin) and each worker answers in the order it was given work, so results
are read strictly in the order they were submitted.
"""
from __future__ import annotations

import itertools
import os
import pickle
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from torch_bridge.engines._workers import frozen_gc, start_method
from torch_bridge.errors import WorkerDied

_HEADER = struct.Struct("<Q")
_CHUNK = 1 << 20


@dataclass
class _Worker:
    process: BaseProcess
    tasks: Connection  # the parent's sending end of the task pipe
    results: Connection  # the parent's receiving end of the result pipe (read non-blocking)
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


class _Reader:
    """A daemon thread moving each worker's complete results out of its pipe into
    `frames[worker]` as they arrive; never blocks on a partial one."""

    def __init__(self, workers: list[_Worker], poll_s: float):
        self.workers, self.poll_s = workers, poll_s
        self.cond = threading.Condition()
        self.frames: list[deque[bytes]] = [deque() for _ in workers]
        self.sweeps = 0  # reading rounds done: after two since a death, its bytes are in
        self._stop = False
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, daemon=True, name="feed-results")
        self._thread.start()

    def _run(self) -> None:
        fds = {w.results.fileno(): i for i, w in enumerate(self.workers)}
        while not self._stop:
            ready = wait([*fds, self._wake_r], timeout=self.poll_s)
            got = []
            for fd in ready:
                assert isinstance(fd, int)  # only file descriptors were passed to wait()
                if fd == self._wake_r:
                    os.read(self._wake_r, 64)
                    continue
                position = fds[fd]
                worker = self.workers[position]
                if not worker.read_available():
                    del fds[fd]  # end of file: the worker and every copy are gone
                while (frame := worker.frame()) is not None:
                    got.append((position, frame))
            with self.cond:
                for position, frame in got:
                    self.frames[position].append(frame)
                self.sweeps += 1
                self.cond.notify_all()

    def _settled(self, position: int, mark: int) -> bool:
        """Worker `position` has a result, or two reading rounds passed since `mark`."""
        return bool(self.frames[position]) or self.sweeps >= mark + 2

    def take(self, position: int, died) -> bytes:
        """The next complete result of worker `position`; `died()` (a WorkerDied to
        raise) once the worker is dead and the reader has read all it sent."""
        process = self.workers[position].process
        with self.cond:
            while not self.frames[position]:
                if not process.is_alive():
                    mark = self.sweeps
                    self.cond.wait_for(partial(self._settled, position, mark),
                                       timeout=4 * self.poll_s)
                    if not self.frames[position]:
                        raise died()
                    break
                self.cond.wait(self.poll_s)
            return self.frames[position].popleft()

    def stop(self) -> None:
        self._stop = True
        os.write(self._wake_w, b"x")
        self._thread.join(5.0)
        os.close(self._wake_r)
        os.close(self._wake_w)


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
        self._reader: _Reader | None = None
        context = get_context(self.method)
        try:
            with frozen_gc():  # fork: the children never collect what this process holds
                for _ in range(workers):
                    self._workers.append(_spawn(context, target, init_args))
        except BaseException:
            self.close()
            raise
        self._reader = _Reader(self._workers, poll_s)

    @property
    def workers(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [w.process.pid for w in self._workers if w.process.pid is not None]

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
            raise self._died(position) from exc
        self._waiting[position].append(task_id)
        return Ticket(position, task_id)

    def result(self, ticket: Ticket):
        """What the task of `ticket` returned (its exception is raised here). Results of
        earlier tasks of that worker not asked for (abandoned) are dropped.

        Raises:
            WorkerDied: the worker died before its result was complete (seen within about
                `poll_s` of its death).
        """
        queue = self._waiting[ticket.worker]
        if ticket.task not in queue:
            raise ValueError(f"task {ticket.task} was already taken or never submitted")
        reader = self._reader
        if reader is None:
            raise RuntimeError("this ProcessPool is closed: no result can be taken from it")
        while True:
            frame = reader.take(ticket.worker, lambda: self._died(ticket.worker))
            task_id, ok, value = pickle.loads(frame)
            queue.remove(task_id)
            if task_id == ticket.task:
                if ok:
                    return value
                raise value

    def _died(self, position: int) -> WorkerDied:
        worker = self._workers[position]
        worker.process.join(self.poll_s)
        part = len(worker.buffer)
        when = f"with {part} bytes of a result received" if part else "before sending a result"
        return WorkerDied(
            f"a feed worker process died (pid {worker.process.pid}, exit code "
            f"{worker.process.exitcode}: killed, out of memory or crashed in native code) "
            f"{when}, while preparing a batch; iterating again starts new workers")

    def close(self) -> None:
        """End every worker now (work in progress is dropped) and close the pipes."""
        for worker in self._workers:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in self._workers:
            worker.process.join(5.0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5.0)
        if self._reader is not None:
            self._reader.stop()
            self._reader = None
        for worker in self._workers:
            if not worker.closed:
                worker.closed = True
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
