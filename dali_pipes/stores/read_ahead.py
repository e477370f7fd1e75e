"""Fetches issued ahead of the reads that will want them: after a read misses block k of an
object, the block cache asks for the next blocks of that object (`blocks` of them, those not
cached yet) in the background, adjacent ones merged into one request of up to `merge`
blocks, with at most `depth` requests in flight per process (and as many waiting; more are
not queued). A read that wants a block being fetched ahead waits for that request instead
of asking again, for at most `wait` seconds (the store's own bound on a request with its
retries); a block whose request failed or ran late is fetched by the read itself, which
then reports any failure as every read does. So the first pass over cold data keeps
several range requests in flight per worker, where each read alone would wait for one
block at a time.

The threads are daemon threads made per process on first use (a forked loader worker
starts its own; none keeps a process from exiting).
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import threading
from collections.abc import Callable

Job = Callable[[], list[bytes]]  # fetches a run of blocks, returns each block's bytes


class ReadAhead:
    """Background fetches of runs of blocks, bounded in flight; see the module doc.

    Args:
        blocks: blocks asked for after a miss (0: no read-ahead).
        merge: the most blocks one request holds.
        depth: requests in flight per process.
        wait: seconds a read waits for a block being fetched ahead.
    """

    def __init__(self, *, blocks: int = 2, merge: int = 2, depth: int = 4,
                 wait: float = 60.0):
        self.blocks, self.merge, self.depth, self.wait = blocks, merge, depth, wait
        self._fresh()

    def _fresh(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: dict[str, cf.Future] = {}
        self._jobs = self._threads = 0

    def __getstate__(self) -> dict:  # each process starts its own threads
        return {k: self.__dict__[k] for k in ("blocks", "merge", "depth", "wait")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._fresh()

    def take(self, key: str) -> bytes | None:
        """The bytes of block `key` when it is being fetched ahead here and arrives in
        time; None otherwise (the caller fetches it)."""
        future = self._pending.get(key) if self._pid == os.getpid() else None
        if future is None:
            return None
        try:
            return future.result(timeout=self.wait)
        except Exception:  # noqa: BLE001  the read fetches it again and reports the failure
            return None

    def busy(self, key: str) -> bool:
        """Whether block `key` is being fetched ahead in this process."""
        return self._pid == os.getpid() and key in self._pending

    def submit(self, keys: list[str], job: Job) -> None:
        """Fetch the adjacent blocks `keys` with `job` in the background (one request),
        unless as many requests wait as are in flight already."""
        if self._pid != os.getpid():  # forked: the parent's threads and lock are not ours
            self._fresh()
        with self._lock:
            if self._jobs >= 2 * self.depth or any(k in self._pending for k in keys):
                return  # the reads fetch what is not there
            futures: dict[str, cf.Future] = {key: cf.Future() for key in keys}
            self._pending.update(futures)
            self._jobs += 1
            if self._threads < min(self.depth, self._jobs):
                self._threads += 1
                threading.Thread(target=self._work, name="read-ahead", daemon=True).start()
        self._queue.put((keys, futures, job))

    def _work(self) -> None:
        while True:
            keys, futures, job = self._queue.get()
            try:
                got, failed = job(), None
            except BaseException as exc:  # noqa: BLE001  handed to the readers waiting
                got, failed = [], exc
            with self._lock:  # no longer on their way before anyone waiting wakes up
                self._jobs -= 1
                for key in keys:
                    if self._pending.get(key) is futures[key]:
                        del self._pending[key]
            for i, key in enumerate(keys):
                if failed is None:
                    futures[key].set_result(got[i])
                else:
                    futures[key].set_exception(failed)
