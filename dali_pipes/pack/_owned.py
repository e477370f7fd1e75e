"""Which files in DST are the pack tool's: recognised by content, never by name alone.

Every JSON file the tool writes (`pack-plan.json`, `manifest*.json`, each shard's
`<shard>.json` record, `categories.json`) holds `"written_by": "dali_pipes.pack"` (MARK). A
shard or its index (`shard-NNNNNN.tar`, `.tar.index.npz`) is the tool's when its record is,
or when DST's plan file is (a packer killed between a shard and its record). Temporary
files (`<name>.<host>_<pid>.tmp`) are the tool's by name: they carry its writer's id.

A file with one of these names that is not the tool's belongs to someone else (a user's
`manifest.json`, another program's shards): `refuse_foreign` stops the run before anything
is written, `--overwrite` included, and `clean` deletes only the tool's own files. DST is a
`dali_pipes.stores.destination.Destination`: a local folder or a folder behind a URL.
"""
from __future__ import annotations

import json
import os
import re

from dali_pipes.stores.destination import HOST, Destination

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


def dump_json(value: dict) -> bytes:
    """A JSON file of the pack tool: `value` marked, indented, keys sorted, a final newline."""
    return (json.dumps(marked(value), indent=1, sort_keys=True) + "\n").encode()


def is_marked(dest: Destination, name: str) -> bool:
    """Whether `name` in DST is a JSON object carrying MARK."""
    try:
        value = json.loads(dest.read(name))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and all(value.get(k) == v for k, v in MARK.items())


def foreign(dest: Destination, names=None) -> list[str]:
    """Names in DST that the pack tool writes but whose files it did not write (sorted);
    `names`: DST's listing when already made."""
    names = sorted(dest.names() if names is None else names)
    plan_ours = is_marked(dest, PLAN_FILE)
    return [name for name in names
            if (match := NAMES.match(name)) is not None and match.group("owner") is None
            and not _ours(dest, name, match, plan_ours)]


def refuse_foreign(dest: Destination) -> None:
    """PackRefused naming the files of DST that have the pack tool's names but are not
    its own (see the module doc)."""
    found = foreign(dest)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise PackRefused(
            f"{dest}: holds {found[0]}{more}, which the pack tool did not write "
            f"(its files carry {json.dumps(MARK)[1:-1]}); the pack tool would replace or "
            f"delete it: move it out of DST, or pack into another folder")


def clean(dest: Destination, everything: bool) -> list[str]:
    """Delete the pack tool's files in DST (`everything`, for --overwrite; `refuse_foreign`
    has run, and a file that is not the tool's is kept anyway) or only the temporary files
    of dead processes on this host; the names deleted."""
    gone = []
    plan_ours = is_marked(dest, PLAN_FILE)
    for name in sorted(dest.names()):
        match = NAMES.match(name)
        if match is None:
            continue
        owner = match.group("owner")
        if owner is None and not (everything and _ours(dest, name, match, plan_ours)):
            continue
        if owner is not None and not (everything or dead_owner(owner)):
            continue
        dest.delete(name)
        gone.append(name)
    return gone


def _ours(dest: Destination, name: str, match: re.Match, plan_ours: bool) -> bool:
    """A JSON file by its mark; a shard or its index by its record's, or the plan's."""
    if name.endswith(".json"):
        return is_marked(dest, name)
    return plan_ours or is_marked(dest, f"{match.group('shard')}.json")


def dead_owner(owner: str) -> bool:
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
