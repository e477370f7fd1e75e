"""Resuming the pack tool safely: the plan a destination was written by, and its locks.

A pack's output is a pure function of its *plan*: SRC's listing (names relative to SRC, sizes,
modification times), the options that change bytes (shard size, max side, quality when
resizing, shuffle seed) and the tool's version. The first run writes the plan to
`DST/pack-plan.json`, and every shard's `.json` record carries the plan's digest. A rerun
keeps a finished shard only under the same plan and when its size and sha256 match its
record (a damaged one is rewritten); another plan is refused, naming what differs, unless
`overwrite`, which first deletes the pack tool's files in DST (and nothing else).

Locks (flock, which the kernel releases when a process dies, so a killed packer never blocks
the next): each packer holds `DST/.pack-part-I-of-N.lock` exclusively (a second packer of the
same part fails at once, naming the pid written in it) and `DST/.pack.lock` shared;
`overwrite` holds `.pack.lock` exclusively, so it neither deletes under a running packer nor
lets one start beside it. Temporary files carry host and pid, so packers never share one.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from dali_pipes import __version__
from dali_pipes.stores.shard_writer import HOST, temp_name

# Bump when the bytes written for the same SRC and options change.
PACK_FORMAT = 2
PLAN_FILE = "pack-plan.json"
_OURS = re.compile(r"^(shard-\d{6}\.tar(\.json|\.index\.npz)?|manifest(-part-\d+-of-\d+)?\.json"
                   r"|pack-plan\.json|categories\.json)(\.(?P<owner>\w+)\.tmp)?$")


class PackRefused(RuntimeError):
    """DST cannot be written by this run (another plan, or another packer holds it)."""


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
    when another packer holds them."""
    with ExitStack() as stack:
        whole = _lock(out / ".pack.lock", fcntl.LOCK_EX if overwrite else fcntl.LOCK_SH)
        if whole is None:
            raise PackRefused(f"{out}: " + (
                f"other packers are writing it ({_holders(out)}); wait for them or stop them "
                "before --overwrite" if overwrite else
                f"being overwritten by {_pid_in(out / '.pack.lock')} (lock "
                f"{out / '.pack.lock'}); wait for it to finish"))
        stack.callback(os.close, whole)
        name = out / f".pack-part-{part[0]}-of-{part[1]}.lock"
        mine = _lock(name, fcntl.LOCK_EX)
        if mine is None:
            raise PackRefused(f"{out}: part {part[0]}/{part[1]} is being packed by "
                              f"{_pid_in(name)} (lock {name}); wait for it to finish or stop it")
        stack.callback(os.close, mine)
        yield


def _lock(path: Path, mode: int) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if mode == fcntl.LOCK_EX:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    return fd


def _pid_in(path: Path) -> str:
    try:
        return path.read_text().strip() or "a process that has not written its pid yet"
    except OSError:
        return "an unknown process"


def _holders(out: Path) -> str:
    held = []
    for path in sorted(out.glob(".pack-part-*.lock")):
        fd = os.open(path, os.O_RDONLY)
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
        strays = sorted(p.name for p in out.glob("shard-*.tar*") if _OURS.match(p.name)
                        and not p.name.endswith(".tmp"))
        if strays:
            raise PackRefused(f"{out}: holds {strays[0]} (and {len(strays) - 1} more shard "
                              f"files) but no {PLAN_FILE}: written by an older pack tool or "
                              "another program; pass --overwrite to delete them and start over")
        tmp = Path(temp_name(path))
        tmp.write_text(json.dumps({"plan": plan, "digest": digest}, indent=1,
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


def clean(out: Path, everything: bool) -> list[str]:
    """Delete the pack tool's files in DST (`everything`, for --overwrite) or only the
    temporary files of dead processes on this host; the names deleted."""
    gone = []
    for path in sorted(out.iterdir()):
        match = _OURS.match(path.name)
        if match is None or not (everything or _stale(match.group("owner"))):
            continue
        path.unlink(missing_ok=True)
        gone.append(path.name)
    return gone


def _stale(owner: str | None) -> bool:
    """Whether a temporary file's owner (`<host>_<pid>` or `<pid>`) died on this host."""
    if owner is None:
        return False
    host, _, pid = owner.rpartition("_")
    if host not in ("", HOST) or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
