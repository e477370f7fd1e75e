"""Which tar shards `data` names: a `.tar` path, a list, a brace pattern or a folder.

Gzip-compressed shards (`.tar.gz`, `.tgz`, as WebDataset's own test data is shipped) are
named as shards too, so that `shard_sources` refuses them with a message saying to gunzip
them: shards are read by byte ranges (an index of member offsets), which a gzip stream
cannot serve.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from dali_pipes.stores.select import store_paths

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
GZIP_SUFFIXES = (".tar.gz", ".tgz")


def expand_braces(pattern: str) -> list[str]:
    """`train-{000..002}.tar` -> train-000.tar, train-001.tar, train-002.tar; `{a,b}` lists.

    Numeric ranges keep the width of their first bound; several groups expand in turn.
    """
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    head, tail, body = pattern[:match.start()], pattern[match.end():], match.group(1)
    span = _RANGE.match(body)
    if span:
        lo, hi = int(span.group(1)), int(span.group(2))
        if hi < lo:
            raise ValueError(f"{pattern}: brace range {body} runs backwards")
        width = len(span.group(1))
        choices = [f"{i:0{width}d}" for i in range(lo, hi + 1)]
    else:
        choices = body.split(",")
    return [out for c in choices for out in expand_braces(head + c + tail)]


def is_shard_data(data) -> bool:
    """Whether local `data` names tar shards (one, a list, a pattern, or folders of them);
    any URL counts (`dali_pipes.sources.layout` tells shards from class folders in a
    store)."""
    items = [data] if isinstance(data, (str, os.PathLike)) else list(data or ())
    return bool(items) and all(_is_shard_item(item) for item in items)


def _is_shard_item(item) -> bool:
    if not isinstance(item, (str, os.PathLike)):
        return False
    text = os.fspath(item)
    if _is_url(text) or names_shard(text) or (_BRACE.search(text) and (
            ".tar" in text or ".tgz" in text)):
        return True
    if not os.path.isdir(text):
        return False
    entries = list(os.scandir(text))
    visible = [e for e in entries if not e.name.startswith(".")]
    if visible and all(_is_gzip(e.name) and e.is_file() for e in visible):
        return True  # gzip shards only: shard_sources refuses them by name
    # shards, and no class folders beside them
    return any(e.name.endswith(".tar") and e.is_file() for e in entries) and not any(
        e.is_dir() and not e.name.startswith(".") for e in entries)


def names_shard(name: str) -> bool:
    """Whether a file name or URL names a tar shard, gzip-compressed ones included."""
    return name.endswith(".tar") or _is_gzip(name)


def _is_gzip(name: str) -> bool:
    return name.lower().endswith(GZIP_SUFFIXES)


def refuse_gzip(names: Sequence[str]) -> None:
    """ValueError naming the first gzip-compressed shard of `names`, if any."""
    found = [n for n in names if _is_gzip(n)]
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ValueError(f"{found[0]}{more}: gzip-compressed shard: gunzip it (`gunzip -k "
                         f"FILE` writes the .tar beside it) and load the .tar; shards are "
                         f"read by byte ranges, which a gzip stream cannot serve")


def _is_url(text: str) -> bool:
    return "://" in text and not text.startswith("file://")


def shard_sources(data, store=None) -> list[list[str]]:
    """The shards of each source, in order.

    A `.tar` path, a pattern or a list of them is one source; a folder of `.tar` files is one
    source (its shards in name order) and a list of folders is one source per folder. In a
    store other than the local one (URLs, a store handed in), a path not ending in `.tar`
    is a folder: its `*.tar` objects, listed through `store` (`folder_shards`).

    Args:
        data: what the user passed as `data`.
        store: the store `data` is in (default: local files).

    Returns:
        One non-empty list of shard paths per source. FileNotFoundError names a missing
        shard; ValueError an empty folder or a list mixing folders and shards.
    """
    paths = store_paths(data, store) if store is not None else []
    if paths:
        return _store_sources(paths, store)
    items = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    folders = [os.path.isdir(os.fspath(i)) for i in items]
    if any(folders) and not all(folders):
        raise ValueError("data: a list of shard folders (one per source) or of shard files "
                         f"(one source), not both: {[os.fspath(i) for i in items]}")
    if all(folders):
        return [_folder_shards(os.fspath(i)) for i in items]
    shards = [s for item in items for s in expand_braces(os.fspath(item))]
    refuse_gzip(shards)
    missing = [s for s in shards if not os.path.isfile(s)]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: shard does not exist"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return [shards]


def names_shard_files(path: str) -> bool:
    """Whether `path` names shards itself (a shard's name or a brace pattern), not a
    folder."""
    return names_shard(path) or bool(_BRACE.search(path))


def _store_sources(paths: list[str], store) -> list[list[str]]:
    folders = [not names_shard_files(p) for p in paths]
    if any(folders) and not all(folders):
        raise ValueError(f"data: a list of shard folders or of shards, not both: {paths}")
    if not all(folders):
        shards = [s for p in paths for s in expand_braces(p)]
        refuse_gzip(shards)
        return [shards]
    out = []
    for path in paths:
        found = folder_shards(path, store)
        if not found:
            refuse_gzip(folder_shards(path, store, gzip=True))
            raise ValueError(f"{path}: no .tar shards in this folder")
        out.append(found)
    return out


def folder_shards(folder: str, store, listed=None, *, gzip: bool = False) -> list[str]:
    """The `.tar` objects (with `gzip`: the gzip-compressed shards) directly in `folder` of
    `store`, sorted (`listed`: the folder's listing when it was already made). A web
    server's folder cannot be listed: the links of its page are taken instead
    (`FsspecStore.glob`)."""
    prefix = folder.rstrip("/") + "/"
    suffixes = GZIP_SUFFIXES if gzip else (".tar",)
    if listed is None:
        glob = getattr(store, "glob", None)
        if glob is not None and folder.startswith(("http://", "https://")):
            return sorted(n for ext in suffixes for n in glob(f"{prefix}*{ext}"))
        listed = store.list(folder)
    return sorted(p for p, _, _ in listed if p.startswith(prefix)
                  and "/" not in p[len(prefix):] and p.lower().endswith(suffixes))


def _folder_shards(folder: str) -> list[str]:
    shards = sorted(str(p) for p in Path(folder).glob("*.tar") if p.is_file())
    if not shards:
        refuse_gzip(sorted(str(p) for p in Path(folder).iterdir() if p.is_file()))
        raise ValueError(f"{folder}: no .tar shards in this folder")
    return shards


def flatten(sources: Sequence[Sequence[str]]) -> list[str]:
    """Every shard of every source, in order."""
    return [s for source in sources for s in source]
