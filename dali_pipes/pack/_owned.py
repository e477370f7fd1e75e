"""Which files in DST are the pack tool's: recognised by content, never by name alone.

Every JSON file the tool writes (`pack-plan.json`, `manifest*.json`, each shard's
`<shard>.json` record, `categories.json`) holds `"written_by": "dali_pipes.pack"` (MARK). A
shard or its index (`shard-NNNNNN.tar`, `.tar.index.npz`) is the tool's when its record is,
or when DST's plan file is (a packer killed between a shard and its record). Temporary
files (`<name>.<host>_<pid>.tmp`) are the tool's by name: they carry its writer's id.

A file with one of these names that is not the tool's belongs to someone else (a user's
`manifest.json`, another program's shards): `refuse_foreign` stops the run before anything
is written, `--overwrite` included, and `clean` deletes only the tool's own files.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from dali_pipes.stores.shard_writer import HOST

MARK = {"written_by": "dali_pipes.pack"}
PLAN_FILE = "pack-plan.json"
NAMES = re.compile(r"^((?P<shard>shard-\d{6}\.tar)(\.json|\.index\.npz)?"
                   r"|manifest(-part-\d+-of-\d+)?\.json|pack-plan\.json|categories\.json)"
                   r"(\.(?P<owner>\w+)\.tmp)?$")


class PackRefused(RuntimeError):
    """DST cannot be written by this run (files that are not the tool's, another plan, or
    another packer holds it)."""


def marked(value: dict) -> dict:
    """`value` with the pack tool's mark (every JSON object it writes carries it)."""
    return {**value, **MARK}


def is_marked(path: Path) -> bool:
    """Whether `path` is a JSON object carrying MARK."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and all(value.get(k) == v for k, v in MARK.items())


def foreign(out: Path) -> list[str]:
    """Names in `out` that the pack tool writes but whose files it did not write (sorted)."""
    plan_ours = is_marked(out / PLAN_FILE)
    return [path.name for path in sorted(out.iterdir())
            if (match := NAMES.match(path.name)) is not None and match.group("owner") is None
            and not _ours(out, path, match, plan_ours)]


def refuse_foreign(out: Path) -> None:
    """PackRefused naming the files of `out` that have the pack tool's names but are not
    its own (see the module doc)."""
    found = foreign(out)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise PackRefused(
            f"{out}: holds {found[0]}{more}, which the pack tool did not write (its files "
            f"carry {json.dumps(MARK)[1:-1]}); the pack tool would replace or delete it: "
            f"move it out of DST, or pack into another folder")


def clean(out: Path, everything: bool) -> list[str]:
    """Delete the pack tool's files in DST (`everything`, for --overwrite; `refuse_foreign`
    has run, and a file that is not the tool's is kept anyway) or only the temporary files
    of dead processes on this host; the names deleted."""
    gone = []
    plan_ours = is_marked(out / PLAN_FILE)
    for path in sorted(out.iterdir()):
        match = NAMES.match(path.name)
        if match is None:
            continue
        owner = match.group("owner")
        if owner is None and not (everything and _ours(out, path, match, plan_ours)):
            continue
        if owner is not None and not (everything or _stale(owner)):
            continue
        path.unlink(missing_ok=True)
        gone.append(path.name)
    return gone


def _ours(out: Path, path: Path, match: re.Match, plan_ours: bool) -> bool:
    """A JSON file by its mark; a shard or its index by its record's, or the plan's."""
    if path.name.endswith(".json"):
        return is_marked(path)
    return plan_ours or is_marked(out / f"{match.group('shard')}.json")


def _stale(owner: str) -> bool:
    """Whether a temporary file's owner (`<host>_<pid>` or `<pid>`) died on this host."""
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
