"""Resuming the pack tool safely: the plan a destination was written by, and its locks.

A pack's output is a pure function of its *plan*: SRC's listing (names relative to SRC, sizes,
modification times), the options that change bytes (shard size, max side, quality when
resizing, shuffle seed) and the tool's version. The first run writes the plan to
`DST/pack-plan.json`, and every shard's `.json` record carries the plan's digest. A rerun
keeps a finished shard only under the same plan and when its size and sha256 match its
record (a damaged one is rewritten); another plan is refused, naming what differs, unless
`overwrite`, which first deletes the pack tool's files in DST (and nothing else: which files
are the tool's is `dali_pipes.pack._owned`).

DST is a `dali_pipes.stores.destination.Destination` (a local folder, or a folder behind a
URL): the plan file is created exclusively (a link on local disk, `If-None-Match: *` on S3),
so of two packers starting at once one plan wins. A kept shard is verified against its
record: by size and sha256 (read once), or, on object storage where the record holds the
version (ETag) the object had when written, by size and that version (no download).
Who may write DST meanwhile is `dali_pipes.pack._locks`.
"""
from __future__ import annotations

import hashlib
import json

from dali_pipes import __version__
from dali_pipes.pack._owned import NAMES, PLAN_FILE, PackRefused, dump_json
from dali_pipes.stores.destination import Destination

# Bump when the bytes written for the same SRC and options change.
PACK_FORMAT = 3  # 3: every JSON file carries the tool's mark (_owned.MARK)


def make_plan(listing: str, *, shard_size: int, max_side: int | None, quality: int,
              shuffle: int | None) -> dict:
    """Everything the output's bytes depend on (`quality` only matters when resizing)."""
    return {"tool": f"dali_pipes {__version__}, pack format {PACK_FORMAT}",
            "src_listing": listing, "shard_size": shard_size, "max_side": max_side,
            "quality": quality if max_side is not None else None, "shuffle": shuffle}


def plan_digest(plan: dict) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def claim_plan(dest: Destination, plan: dict) -> str:
    """Check DST's recorded plan against `plan` (or record it first); the plan's digest.
    PackRefused names what differs, or shards that no plan file vouches for."""
    digest = plan_digest(plan)
    names = dest.names()
    if PLAN_FILE not in names:
        strays = sorted(n for n in names if n.startswith("shard-") and NAMES.match(n)
                        and not n.endswith(".tmp"))
        if strays:
            raise PackRefused(f"{dest}: holds {strays[0]} (and {len(strays) - 1} more shard "
                              f"files) of the pack tool but no {PLAN_FILE} saying which "
                              "plan wrote them; pass --overwrite to delete them and start over")
        dest.create(PLAN_FILE, dump_json({"plan": plan, "digest": digest}))
    recorded = _read_plan(dest)
    if recorded.get("digest") != digest:
        raise PackRefused(f"{dest} was packed with another plan: "
                          f"{differences(recorded.get('plan', {}), plan)}; "
                          "pass --overwrite to delete its shards and start over, or pack into "
                          "another DST")
    return digest


def _read_plan(dest: Destination) -> dict:
    try:
        value = json.loads(dest.read(PLAN_FILE))
    except (OSError, ValueError, RecursionError) as exc:
        raise PackRefused(f"{dest.path(PLAN_FILE)}: unreadable plan ({exc}); pass "
                          "--overwrite to start over") from exc
    if not isinstance(value, dict):
        raise PackRefused(f"{dest.path(PLAN_FILE)}: not a plan (a JSON object expected); "
                          "pass --overwrite")
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


def shard_state(dest: Destination, name: str, digest: str,
                listed: dict[str, tuple[int, int]]) -> str:
    """'done' (keep it), 'missing' or 'damaged: <why>' (write it again); PackRefused for a
    shard recorded under another plan. `listed`: DST's listing ({name: (size, version)})."""
    record_name = f"{name}.json"
    if name not in listed or record_name not in listed:
        return "missing"
    try:
        record = json.loads(dest.read(record_name))
    except (OSError, ValueError, RecursionError) as exc:
        return f"damaged: record {record_name} unreadable ({exc})"
    if not isinstance(record, dict) or record.get("plan") != digest:
        found = record.get("plan") if isinstance(record, dict) else None
        raise PackRefused(f"{dest.path(record_name)}: written by another plan (digest "
                          f"{found}, this run's {digest}); pass --overwrite to start over")
    size, version = listed[name]
    if size != record.get("bytes"):
        return f"damaged: {size} bytes, its record says {record.get('bytes')}"
    if dest.local is None and record.get("version") == version:
        return "done"  # the object written with this record, unchanged since
    if dest.sha256(name) != record.get("sha256"):
        return "damaged: sha256 differs from its record"
    return "done"
