"""Reading class folders for the listings (`dali_pipes.sources.folders`): which directory
entries are samples (`is_sample`), the folders of a class folder with their entries
(`class_folder_entries`), and the samples among a folder's entries (`sample_entries`).

The walk reads each directory once (`os.scandir`: names and entry types, no `stat` per
file). The common entry, a visible regular file with a sample suffix in a folder reached
without a symlink, is taken on its name and type alone; every other entry goes through the
full predicate and the symlink rule (`dali_pipes.sources.links`), which say why it is left
out.
"""
from __future__ import annotations

import os
from operator import attrgetter

from dali_pipes.sources.links import LinkRule

Ignored = list[tuple[str, str]]  # (path, reason) of the entries that are not samples
_by_name = attrgetter("name")


def is_hidden(name: str) -> bool:
    """Whether a directory entry named `name` is hidden (a leading dot): never a sample."""
    return name.startswith(".")


def has_extension(name: str, extensions: frozenset[str]) -> bool:
    """Whether file name `name` ends in one of `extensions` (lower-case, ".jpg"), in any case."""
    _, dot, suffix = name.rpartition(".")
    return bool(dot) and "." + suffix.lower() in extensions


def is_sample(entry: os.DirEntry, extensions: frozenset[str] | None) -> str | None:
    """None when `entry` is a sample, else why not (a short reason).

    Args:
        entry: a directory entry of a class folder.
        extensions: lower-case suffixes (".jpg") of sample files; None: samples are the
            visible sub-folders (frame folders), files are ignored.

    Returns:
        None for a sample; "hidden", "other extension", "not a file", "not a folder",
        "dangling symlink" or "symlink loop or unreadable" otherwise.
    """
    if is_hidden(entry.name):
        return "hidden"
    want_dir = extensions is None
    try:
        ok = entry.is_dir() if want_dir else entry.is_file()
    except OSError:
        ok = False
    if not ok:
        return _why_not(entry, want_dir)
    if extensions is None:
        return None
    return None if has_extension(entry.name, extensions) else "other extension"


def _why_not(entry: os.DirEntry, want_dir: bool) -> str:
    if entry.is_symlink():
        try:
            os.stat(entry.path)
        except FileNotFoundError:
            return "dangling symlink"
        except OSError:
            return "symlink loop or unreadable"
    return "not a file" if not want_dir else "not a folder"


def class_folder_entries(folder: str, recursive: bool, rule: LinkRule, ignored: Ignored
                         ) -> list[tuple[str, list[os.DirEntry], bool]]:
    """(folder, its entries sorted by name, whether it is reached through a symlink) for a
    class folder; with `recursive`, for it and every visible sub-folder (in sorted path
    order, as torchvision's ImageFolder walks them), sub-folders left out of the entries,
    a linked sub-folder entered only where `rule` follows it, a symlink loop walked once.
    OSError when a folder cannot be read."""
    if not recursive:
        with os.scandir(folder) as it:
            return [(folder, sorted(it, key=_by_name), rule.via_link(folder))]
    found: list[tuple[str, list[os.DirEntry]]] = []
    _walk(folder, rule, ignored, set(), found)
    found.sort(key=lambda item: item[0])
    return [(top, files, rule.via_link(top)) for top, files in found]


def _walk(top: str, rule: LinkRule, ignored: Ignored, seen: set[str],
          found: list[tuple[str, list[os.DirEntry]]]) -> None:
    """Top-down, sub-folders in directory order (as `os.walk(followlinks=True)`)."""
    real = os.path.realpath(top)  # a symlink loop is walked once, not forever
    if real in seen:
        return
    seen.add(real)
    with os.scandir(top) as it:
        entries = list(it)
    try:  # a type bit each (a stat only for symlinks and file systems without types)
        is_dir = [entry.is_dir() for entry in entries]
    except OSError:
        is_dir = [_is_dir(entry) for entry in entries]
    files = sorted((e for e, d in zip(entries, is_dir, strict=True) if not d), key=_by_name)
    dirs = [e for e, d in zip(entries, is_dir, strict=True) if d]
    found.append((top, files))
    for name in _followed(top, [d.name for d in dirs], rule, ignored):
        _walk(os.path.join(top, name), rule, ignored, seen, found)


def _followed(top: str, dirs: list[str], rule: LinkRule, ignored: Ignored) -> list[str]:
    """The visible sub-folders of `top` a recursive walk enters (linked ones per `rule`)."""
    keep = []
    for name in dirs:
        if is_hidden(name):
            continue
        path = os.path.join(top, name)
        why = rule.why_not(path, os.path.islink(path))
        if why is not None:
            ignored.append((path, why))
        else:
            keep.append(name)
    return keep


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def sample_entries(entries: list[os.DirEntry], extensions: frozenset[str] | None,
                   linked: bool, rule: LinkRule, ignored: Ignored) -> list[os.DirEntry]:
    """The samples among a folder's `entries` (in their order); the others go to `ignored`
    with their reason. `linked`: the folder is reached through a symlink."""
    if linked or extensions is None:
        return [e for e in entries if _check(e, extensions, linked, rule, ignored)]
    # The common entry costs a name test and a type bit read with the directory.
    good = [(n := e.name)[:1] != "." and n[n.rfind("."):].lower() in extensions
            and e.is_file(follow_symlinks=False) for e in entries]
    if all(good):
        return entries
    return [e for e, ok in zip(entries, good, strict=True)
            if ok or _check(e, extensions, False, rule, ignored)]


def _check(entry: os.DirEntry, extensions: frozenset[str] | None, linked: bool,
           rule: LinkRule, ignored: Ignored) -> bool:
    why = is_sample(entry, extensions)
    if why is None:
        why = rule.why_not(entry.path, linked or entry.is_symlink())
    if why is not None:
        ignored.append((entry.path, why))
    return why is None
