"""Resuming the pack tool safely: the plan a destination was written by, and its locks.

A pack's output is a pure function of its *plan*: SRC's listing (names relative to SRC, sizes,
modification times), the options that change bytes (shard size, max side, quality when
resizing, shuffle seed) and the tool's version. The first run writes the plan to
`DST/pack-plan.json`, and every shard's `.json` record carries the plan's digest. A rerun
keeps a finished shard only under the same plan and when its size and sha256 match its
record (a damaged one is rewritten); another plan is refused, naming what differs, unless
`overwrite`, which first deletes the pack tool's files in DST (and nothing else: which files
are the tool's is `dali_pipes.pack._owned`).

Locks (flock, which the kernel releases when a process dies, so a killed packer never blocks
the next): each packer holds `DST/.pack-part-I-of-N.lock` exclusively (a second packer of the
same part fails at once, naming the pid written in it) and `DST/.pack.lock` shared;
`overwrite` holds `.pack.lock` exclusively, so it neither deletes under a running packer nor
lets one start beside it. A packer removes its lock files when it ends (finished or failed):
its part's, and `.pack.lock` when no other packer holds it; a packer that opened a lock
file just removed opens it again. Temporary files carry host and pid, so packers never
share one.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from dali_pipes import __version__
from dali_pipes.pack._owned import NAMES, PLAN_FILE, PackRefused, marked
from dali_pipes.stores.shard_writer import temp_name

# Bump when the bytes written for the same SRC and options change.
PACK_FORMAT = 3  # 3: every JSON file carries the tool's mark (_owned.MARK)
# A lock found held is tried again this often, a moment apart: its holder may be a packer
# that is ending and removing it.
LOCK_TRIES, LOCK_PAUSE_S = 4, 0.05


def make_plan(listing: str, *, shard_size: int, max_side: int | None, quality: int,
              shuffle: int | None) -> dict:
    """Everything the output's bytes depend on (`quality` only matters when resizing)."""
    return {"tool": f"dali_pipes {__version__}, pack format {PACK_FORMAT}",
            "src_listing": listing, "shard_size": shard_size, "max_side": max_side,
            "quality": quality if max_side is not None else None, "shuffle": shuffle}


def plan_digest(plan: dict) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


@contextmanager
def locked(out: Path, part: tuple[int, int], overwrite: bool) -> Iterator[None]:
    """Hold DST's locks for a packer of `part` (see the module doc); PackRefused at once
    when another packer holds them. The lock files are removed on the way out."""
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


def claim_plan(out: Path, plan: dict) -> str:
    """Check DST's recorded plan against `plan` (or record it first); the plan's digest.
    PackRefused names what differs, or shards that no plan file vouches for."""
    digest = plan_digest(plan)
    path = out / PLAN_FILE
    if not path.exists():
        strays = sorted(p.name for p in out.glob("shard-*.tar*") if NAMES.match(p.name)
                        and not p.name.endswith(".tmp"))
        if strays:
            raise PackRefused(f"{out}: holds {strays[0]} (and {len(strays) - 1} more shard "
                              f"files) of the pack tool but no {PLAN_FILE} saying which "
                              "plan wrote them; pass --overwrite to delete them and start over")
        tmp = Path(temp_name(path))
        tmp.write_text(json.dumps(marked({"plan": plan, "digest": digest}), indent=1,
                                  sort_keys=True) + "\n")
        try:
            os.link(tmp, path)  # atomic: of two packers starting at once, one plan wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    recorded = _read_plan(path)
    if recorded.get("digest") != digest:
        raise PackRefused(f"{out} was packed with another plan: "
                          f"{differences(recorded.get('plan', {}), plan)}; "
                          "pass --overwrite to delete its shards and start over, or pack into "
                          "another DST")
    return digest


def _read_plan(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise PackRefused(f"{path}: unreadable plan ({exc}); pass --overwrite to start over"
                          ) from exc
    if not isinstance(value, dict):
        raise PackRefused(f"{path}: not a plan (a JSON object expected); pass --overwrite")
    return value


def differences(old: dict, new: dict) -> str:
    """What changed between two plans, in words (pure)."""
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "src_listing":
            out.append(f"SRC's files were added, removed, renamed or changed (then "
                       f"{old.get(key)!r}, now {new.get(key)!r})")
        else:
            out.append(f"{key} was {old.get(key)!r}, now {new.get(key)!r}")
    return "; ".join(out) or "the plan file's digest does not match its plan"


def shard_state(out: Path, name: str, digest: str) -> str:
    """'done' (keep it), 'missing' or 'damaged: <why>' (write it again); PackRefused for a
    shard recorded under another plan."""
    tar, record_path = out / name, out / f"{name}.json"
    if not (tar.is_file() and record_path.is_file()):
        return "missing"
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        return f"damaged: record {record_path.name} unreadable ({exc})"
    if not isinstance(record, dict) or record.get("plan") != digest:
        found = record.get("plan") if isinstance(record, dict) else None
        raise PackRefused(f"{record_path}: written by another plan (digest {found}, this "
                          f"run's {digest}); pass --overwrite to start over")
    size = tar.stat().st_size
    if size != record.get("bytes"):
        return f"damaged: {size} bytes, its record says {record.get('bytes')}"
    if _sha256(tar) != record.get("sha256"):
        return "damaged: sha256 differs from its record"
    return "done"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
