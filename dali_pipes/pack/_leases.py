"""The pack tool's locks on object storage, where there is no flock: leases.

A lock (`.pack-part-I-of-N.lock`, `.pack.lock`, the names local folders use) is an object
naming its holder (pid, host, a token) and when its lease ends. It is taken with an
exclusive create (`Destination.create`: `If-None-Match: *` on S3, so of two packers one
wins). A lock found is live while its lease runs and, for a holder on this host, while its
process lives: a packer killed here is replaced at once, one killed on another host once
its lease has run out (LEASE_S). A stale lock is taken over with a conditional replace
(`If-Match` its ETag), which one of several takers wins. The holder renews its leases every
RENEW_S, each renewal conditional on the ETag it wrote last; a renewal refused means
another packer took the lock over, and the run stops before writing its manifest
(`PackRefused`; the shards it wrote are kept). The locks are deleted at the end (again
conditional on their ETag).

`--overwrite` against packers, without a shared lock: each side writes its own lock first
and then looks for the other's (`--overwrite`: `.pack.lock`, then any live part lock; a
packer: its part's lock, then a live `.pack.lock`). S3 reads what was written before them,
so at least one side sees the other and is refused; both may be, neither runs beside the
other. On stores without conditional requests (`dali_pipes.stores.destination`: other
fsspec protocols) creates and replaces are a check and a write, and two packers starting at
the same moment may both run.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dali_pipes.pack._owned import PackRefused, dead_owner
from dali_pipes.stores.destination import HOST, Destination

LEASE_S = 120.0  # a lock not renewed for this long is stale
RENEW_S = 20.0  # how often a holder renews its leases
TRIES = 4  # takes of a lock that changed hands meanwhile
WHOLE = ".pack.lock"


@dataclass
class _Lease:
    name: str
    tag: str
    token: str


def part_lock(part: tuple[int, int]) -> str:
    return f".pack-part-{part[0]}-of-{part[1]}.lock"


def lease_body(token: str, lease_s: float = LEASE_S) -> bytes:
    """What a lock holds: its holder and the end of its lease (seconds since the epoch)."""
    return json.dumps({"holder": f"pid {os.getpid()} on {socket.gethostname()}",
                       "host": HOST, "pid": os.getpid(), "token": token,
                       "expires": time.time() + lease_s}, sort_keys=True).encode()


def live_holder(data: bytes) -> str | None:
    """The holder a lock's bytes name while its lease is live; None for a stale lock (its
    lease ran out, its holder died on this host, or it holds no lease at all)."""
    try:
        value = json.loads(data)
        expires, host, pid = float(value["expires"]), str(value["host"]), int(value["pid"])
    except (ValueError, KeyError, TypeError):
        return None
    if expires < time.time() or dead_owner(f"{host}_{pid}"):
        return None
    return str(value.get("holder", f"pid {pid} on {host}"))


def _acquire(dest: Destination, name: str) -> tuple[_Lease | None, str]:
    """(the lease of lock `name`, "") or (None, its live holder)."""
    for _ in range(TRIES):
        token = uuid.uuid4().hex
        tag = dest.create(name, lease_body(token))
        if tag is not None:
            return _Lease(name, tag, token), ""
        found = dest.read_tagged(name)
        if found is None:  # released meanwhile: create it again
            continue
        holder = live_holder(found[0])
        if holder is not None:
            return None, holder
        tag = dest.replace(name, lease_body(token), found[1])
        if tag is not None:
            return _Lease(name, tag, token), ""
    return None, "another packer (the lock changed hands while this one took it)"


def _live_parts(dest: Destination) -> list[str]:
    """'<holder> (<lock>)' of every live part lock in DST."""
    held = []
    for name in sorted(dest.names()):
        if name.startswith(".pack-part-") and name.endswith(".lock"):
            found = dest.read_tagged(name)
            holder = live_holder(found[0]) if found else None
            if holder:
                held.append(f"{holder} ({name})")
    return held


class _Renewer:
    """Renews leases every RENEW_S in a thread; `check()` raises PackRefused once one
    was taken over."""

    def __init__(self, dest: Destination, leases: list[_Lease]):
        self.dest, self.leases, self.lost = dest, leases, ""
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pack-leases", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(RENEW_S):
            for lease in self.leases:
                try:
                    tag = self.dest.replace(lease.name, lease_body(lease.token), lease.tag)
                except OSError:  # unreachable for now: the lease runs LEASE_S, try again
                    continue
                if tag is None:
                    self.lost = lease.name
                    return
                lease.tag = tag

    def check(self) -> None:
        if self.lost:
            raise PackRefused(
                f"{self.dest}: lost its lock {self.lost} (not renewed within {LEASE_S:.0f} "
                "s, another packer took it over); the shards written are kept: run again "
                "to resume")

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


@contextmanager
def leased(dest: Destination, part: tuple[int, int], overwrite: bool
           ) -> Iterator[Callable[[], None]]:
    """Hold DST's leases for a packer of `part` (see the module doc); PackRefused at once
    when another packer holds them. Yields a check raising PackRefused once a lease was
    lost; the locks are deleted on the way out."""
    held: list[_Lease] = []
    try:
        if overwrite:
            held.append(_take(dest, WHOLE, lambda who: f"being overwritten by {who}"))
            others = _live_parts(dest)
            if others:
                raise PackRefused(f"{dest}: other packers are writing it ({', '.join(others)})"
                                  "; wait for them or stop them before --overwrite")
        mine = part_lock(part)
        held.append(_take(dest, mine, lambda who: f"part {part[0]}/{part[1]} is being packed "
                          f"by {who}"))
        if not overwrite:
            found = dest.read_tagged(WHOLE)
            holder = live_holder(found[0]) if found else None
            if holder:
                raise PackRefused(f"{dest}: being overwritten by {holder} (lock "
                                  f"{dest.path(WHOLE)}); wait for it to finish")
        renewer = _Renewer(dest, held)
        try:
            yield renewer.check
        finally:
            renewer.stop()
    finally:
        for lease in reversed(held):
            try:
                dest.delete(lease.name, lease.tag)
            except OSError:  # its lease runs out by itself
                pass


def _take(dest: Destination, name: str, said: Callable[[str], str]) -> _Lease:
    lease, holder = _acquire(dest, name)
    if lease is None:
        raise PackRefused(f"{dest}: {said(holder)} (lock {dest.path(name)}); wait for it to "
                          "finish or stop it")
    return lease
