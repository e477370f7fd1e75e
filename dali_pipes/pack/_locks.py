"""Who may write DST: one packer per part, and no packer beside an `--overwrite`.

Local folders: flock, which the kernel releases when a process dies, so a killed packer
never blocks the next. Each packer holds `DST/.pack-part-I-of-N.lock` exclusively (a second
packer of the same part fails at once, naming the pid written in it) and `DST/.pack.lock`
shared; `overwrite` holds `.pack.lock` exclusively, so it neither deletes under a running
packer nor lets one start beside it. A packer removes its lock files when it ends (finished
or failed): its part's, and `.pack.lock` when no other packer holds it; a packer that
opened a lock file just removed opens it again.

Object storage has no flock: the same lock names are leases there (`dali_pipes.pack._leases`).
Temporary files carry host and pid, so packers never share one.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from dali_pipes.pack._leases import leased
from dali_pipes.pack._owned import PackRefused
from dali_pipes.stores.destination import Destination

# A lock found held is tried again this often, a moment apart: its holder may be a packer
# that is ending and removing it.
LOCK_TRIES, LOCK_PAUSE_S = 4, 0.05


@contextmanager
def locked(dest: Destination, part: tuple[int, int], overwrite: bool):
    """Hold DST's locks for a packer of `part` (see the module doc); PackRefused at once
    when another packer holds them. The locks are removed on the way out. Yields a
    function raising PackRefused when the locks were lost meanwhile (a lease taken over)."""
    if dest.local is None:
        with leased(dest, part, overwrite) as check:
            yield check
        return
    with _flocked(dest.local, part, overwrite):
        yield lambda: None


@contextmanager
def _flocked(out: Path, part: tuple[int, int], overwrite: bool) -> Iterator[None]:
    with ExitStack() as stack:
        whole_path = out / ".pack.lock"
        whole = _lock(whole_path, fcntl.LOCK_EX if overwrite else fcntl.LOCK_SH)
        if whole is None:
            raise PackRefused(f"{out}: " + (
                f"other packers are writing it ({_holders(out)}); wait for them or stop them "
                "before --overwrite" if overwrite else
                f"being overwritten by {_pid_in(whole_path)} (lock {whole_path}); wait for "
                "it to finish"))
        stack.callback(_release, whole_path, whole)
        name = out / f".pack-part-{part[0]}-of-{part[1]}.lock"
        mine = _lock(name, fcntl.LOCK_EX)
        if mine is None:
            raise PackRefused(f"{out}: part {part[0]}/{part[1]} is being packed by "
                              f"{_pid_in(name)} (lock {name}); wait for it to finish or stop it")
        stack.callback(_release, name, mine)
        yield


def _lock(path: Path, mode: int) -> int | None:
    """A descriptor of the lock file `path` holding `mode`, or None while another process
    holds it (tried LOCK_TRIES times: an ending packer holds it only to remove it)."""
    for attempt in range(LOCK_TRIES):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if attempt + 1 < LOCK_TRIES:
                time.sleep(LOCK_PAUSE_S)
            continue
        if not _same_file(fd, path):  # removed by an ending packer meanwhile: open anew
            os.close(fd)
            continue
        if mode == fcntl.LOCK_EX:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return fd
    return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _release(path: Path, fd: int) -> None:
    """Remove the lock file `path` if this process can hold it alone (another packer
    sharing `.pack.lock` removes it when it ends), then let go of it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(fd, path):
            path.unlink(missing_ok=True)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)


def _pid_in(path: Path) -> str:
    try:
        return path.read_text().strip() or "a process that has not written its pid yet"
    except OSError:
        return "an unknown process"


def _holders(out: Path) -> str:
    held = []
    for path in sorted(out.glob(".pack-part-*.lock")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # its packer ended meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(f"{_pid_in(path)} ({path.name})")
        finally:
            os.close(fd)
    return ", ".join(held) or "a packer starting up"
