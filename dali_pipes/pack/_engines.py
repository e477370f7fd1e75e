"""The pack tool's engines: where the shard jobs run. Both take the same jobs (`ShardJob`),
SRC's store and DST, and report each finished shard to the driver's `Progress`.

- local: in this process, or `workers` processes of this machine (spawned). When a worker
  process dies (killed, out of memory) the shards not finished are written again by new
  processes, up to MAX_ATTEMPTS, with a line naming them (multiprocessing's Pool would
  wait for a dead worker's shard forever).
- ray: one Ray task per shard (1 CPU each; at most `workers` at once, default as many as
  the cluster has CPUs) on the cluster at `address` (else `RAY_ADDRESS`, else a local Ray
  started on 127.0.0.1 and stopped at the end; in a process where Ray is initialised, that
  connection). A task whose worker or node dies is submitted again, up to MAX_ATTEMPTS,
  with a line naming the shard; a task that raises (a SRC file that cannot be read) stops
  the run with its error, as the local engine does. The driver never reads sample bytes.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing import get_context

from dali_pipes.pack._args import PackArgumentError
from dali_pipes.pack._progress import Progress
from dali_pipes.pack._shard import ShardJob, pack_shard
from dali_pipes.stores import Store
from dali_pipes.stores.destination import Destination

MAX_ATTEMPTS = 4  # tries of a shard whose Ray worker died (Ray's own default: 1 + 3)
RAY_EXTRA = 'pip install "dali-pipes[ray]"'


class PackTaskFailed(OSError):
    """A shard's work failed for reasons outside it: a Ray task MAX_ATTEMPTS times (worker
    or node deaths), or a worker process of the local engine died."""


def run_local(jobs: list[ShardJob], store: Store, dest: Destination, workers: int,
              progress: Progress) -> None:
    work = functools.partial(pack_shard, store=store, dest=dest)
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            progress.done(work(job))
        return
    for attempt in range(1, MAX_ATTEMPTS + 1):
        jobs = _pool_round(work, jobs, workers, progress)
        if not jobs:
            return
        names = ", ".join(job.name for job in jobs)
        if attempt == MAX_ATTEMPTS:
            raise PackTaskFailed(f"{dest}: worker processes died {attempt} times; not "
                                 f"written: {names}")
        progress.say(f"{dest}: a worker process died; writing {names} again (attempt "
                     f"{attempt + 1} of {MAX_ATTEMPTS})")


def _pool_round(work, jobs: list[ShardJob], workers: int, progress: Progress
                ) -> list[ShardJob]:
    """Run `jobs` on `workers` spawned processes; the jobs left when one of them died."""
    pool = ProcessPoolExecutor(min(workers, len(jobs)), mp_context=get_context("spawn"))
    futures: dict = {}
    broken = False
    try:
        for n, job in enumerate(jobs):
            try:
                futures[pool.submit(work, job)] = job
            except (BrokenProcessPool, OSError) as exc:  # a worker died meanwhile
                # (a process spawned by this submit as the pool broke finds its queue
                # closed: OSError)
                if isinstance(exc, OSError) and not getattr(pool, "_broken", False):
                    raise
                broken = True
                return _unfinished(futures) + jobs[n:]
        for future in as_completed(futures):
            try:
                progress.done(future.result())
            except BrokenProcessPool:
                broken = True
                return _unfinished(futures)
        return []
    finally:
        if broken:
            _kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)  # running shards end, no new ones


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker process of a broken pool. Its manager thread joins each of them
    after ending those it knows of, but a process that a `submit` spawned while the pool
    broke is never told to end and waits for work forever, so the join (and `shutdown`)
    would too. Every submit has returned here: the pool has no more processes to come."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            process.kill()
        except (OSError, ValueError):  # already ended, or closed
            pass


def _unfinished(futures: dict) -> list[ShardJob]:
    """The jobs of `futures` that did not finish (a broken pool fails them all)."""
    return [job for f, job in futures.items() if not f.done() or f.exception() is not None]


def check_ray() -> None:
    """PackArgumentError naming the extra that installs Ray, when it is not installed."""
    try:
        found = sys.modules.get("ray", False) is not None and \
            importlib.util.find_spec("ray") is not None
    except ValueError:  # imported without a spec
        found = True
    if not found:
        raise PackArgumentError(f"--engine ray needs Ray, which is not installed here: "
                                f"{RAY_EXTRA}")


@contextmanager
def connected(address: str | None, workers: int | None) -> Iterator:
    """`ray`, connected (see the module doc); a Ray this call started stops at the end."""
    check_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    if not address and "ray" not in sys.modules:
        # a one-machine Ray (read when Ray is imported) binds to 127.0.0.1 only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    if ray.is_initialized():
        yield ray
        return
    if address:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    else:
        ray.init(address="local", num_cpus=workers, include_dashboard=False,
                 _node_ip_address="127.0.0.1", logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def run_ray(jobs: list[ShardJob], store: Store, dest: Destination, workers: int | None,
            address: str | None, progress: Progress) -> None:
    with connected(address, workers) as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(pack_shard)
        shared = (ray.put(store), ray.put(dest))
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending = deque((job, 1) for job in jobs)
        running: dict = {}
        progress.started()
        try:
            while pending or running:
                while pending and len(running) < limit:
                    job, attempt = pending.popleft()
                    running[task.remote(job, *shared)] = (job, attempt)
                [ref], _ = ray.wait(list(running), num_returns=1)
                job, attempt = running.pop(ref)
                retry = _finished(ray, ref, dest.path(job.name), attempt, progress)
                if retry:
                    pending.appendleft((job, attempt + 1))
        finally:
            for ref in running:  # after a failure: the others stop, nothing half-written stays
                ray.cancel(ref)


def _finished(ray, ref, shard: str, attempt: int, progress: Progress) -> bool:
    """Report a finished task; whether to submit it again (its worker died). The task's
    own error is raised as it was raised in the task."""
    try:
        progress.done(ray.get(ref))
        return False
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        progress.say(f"{shard}: task failed ({_said(cause or exc)})")
        if isinstance(cause, Exception):
            raise cause from None
        raise PackTaskFailed(f"{shard}: {_said(exc)}") from exc
    except ray.exceptions.RayError as exc:
        if attempt >= MAX_ATTEMPTS:
            progress.say(f"{shard}: task failed ({_said(exc)}); gave up after {attempt} "
                         "attempts")
            raise PackTaskFailed(f"{shard}: its task failed {attempt} times, last: "
                                 f"{_said(exc)}") from exc
        progress.say(f"{shard}: task failed ({_said(exc)}); retrying it (attempt "
                     f"{attempt + 1} of {MAX_ATTEMPTS})")
        return True


def _said(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"
