"""Reading class folders for the listings (`dali_pipes.sources.folders`): which directory
entries are samples (`is_sample`) and the sample names of a class folder and, for a
recursive listing, of its sub-folders (`class_folder_samples`).

The walk reads each directory once (`os.scandir`: names and entry types, no `stat` per
file), a few thousand entries at a time, and keeps names, not entries. The common entry, a
visible regular file whose suffix is one of the extensions in lower or upper case, in a
folder reached without a symlink, is taken on its name and type alone; every other entry
goes through the full predicate and the symlink rule (`dali_pipes.sources.links`), which
say why it is left out. Those checks run in listing order (folders in sorted path order,
names sorted within each), so the first of two links to one file is the one listed.
"""
from __future__ import annotations

import os
from functools import lru_cache
from itertools import islice, repeat
from operator import attrgetter

from dali_pipes.sources.links import LinkRule

Ignored = list[tuple[str, str]]  # (path, reason) of the entries that are not samples
Found = list[tuple[str, list[str]]]  # (folder, its sample names in sorted order)
_by_name = attrgetter("name")
_CHUNK = 4096  # entries read from a directory at a time (all are never held at once)


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


@lru_cache(maxsize=16)
def plain_suffixes(extensions: frozenset[str] | None) -> tuple[str, ...] | None:
    """The suffixes that take a file name without the full predicate: each extension in
    lower and in upper case (mixed case goes through `is_sample`); None (every entry
    checked) for folder samples or an extension that is not one dot and lower-case."""
    if not extensions or any(e[:1] != "." or "." in e[1:] or e != e.lower()
                             for e in extensions):
        return None
    return tuple(sorted(extensions)) + tuple(sorted(e.upper() for e in extensions))


def read_folder(top: str, suffixes: tuple[str, ...] | None
                ) -> tuple[list[str], list[os.DirEntry]]:
    """(names of the plain samples of folder `top`, its other entries), both in directory
    order; `suffixes`: see `plain_suffixes` (None: every entry is "other"). OSError when
    the folder cannot be read."""
    names: list[str] = []
    others: list[os.DirEntry] = []
    with os.scandir(top) as it:
        while entries := list(islice(it, _CHUNK)):
            if suffixes is None:
                others += entries
                continue
            files = [e.name for e in entries if e.is_file(follow_symlinks=False)]
            if len(files) == len(entries) and _all_plain(files, suffixes):
                names += files
                continue
            for e in entries:  # some entries are not plain: sort them out one by one
                if e.name[:1] != "." and e.name.endswith(suffixes) and \
                        e.is_file(follow_symlinks=False):
                    names.append(e.name)
                else:
                    others.append(e)
    return names, others


def _all_plain(names: list[str], suffixes: tuple[str, ...]) -> bool:
    """Whether every name of `names` (one directory's, no NUL in any) is visible and ends
    in one of `suffixes`. A folder's files mostly share a suffix: the names joined by NULs
    are searched for it in a few C-level passes, not one call per name."""
    joined = "\0" + "\0".join(names) + "\0"
    if "\0." in joined:
        return False
    dot = names[0].rfind(".") if names else -1
    common = names[0][dot:]
    if dot >= 0 and common in suffixes and joined.count(common + "\0") == len(names):
        return True  # each name holds "<suffix>\0" at most once: at its end
    return all(map(str.endswith, names, repeat(suffixes)))


def class_folder_samples(folder: str, linked: bool, extensions: frozenset[str] | None,
                         recursive: bool, rule: LinkRule, ignored: Ignored) -> Found:
    """(folder, sample names sorted) for class folder `folder` and, with `recursive`, for
    every visible sub-folder (sorted by path, as torchvision's ImageFolder walks them; a
    linked sub-folder entered only where `rule` follows it, a symlink loop walked once);
    entries left out go to `ignored` with their reason. `linked`: `folder` is reached
    through a symlink (`LinkRule.via_link`). OSError when a folder cannot be read."""
    suffixes = plain_suffixes(extensions)
    if not recursive:
        names, others = read_folder(folder, None if linked else suffixes)
        return [(folder, _samples(names, others, extensions, linked, rule, ignored))]
    real = os.path.realpath(folder) if linked else \
        os.path.join(rule.root, os.path.basename(folder))
    walked: list[tuple[str, bool, list[str], list[os.DirEntry]]] = []
    _walk(folder, real, linked, suffixes, rule, ignored, set(), walked)
    walked.sort(key=lambda item: item[0])
    return [(top, _samples(names, files, extensions, via, rule, ignored))
            for top, via, names, files in walked]


def _walk(top: str, real: str, linked: bool, suffixes: tuple[str, ...] | None,
          rule: LinkRule, ignored: Ignored, seen: set[str],
          walked: list[tuple[str, bool, list[str], list[os.DirEntry]]]) -> None:
    """Top-down, sub-folders in directory order (as `os.walk(followlinks=True)`); `real`:
    the real path of `top` (a symlink loop is walked once, not forever)."""
    if real in seen:
        return
    seen.add(real)
    names, others = read_folder(top, None if linked else suffixes)
    is_dir = [_is_dir(e) for e in others]
    walked.append((top, linked, names,
                   [e for e, d in zip(others, is_dir, strict=True) if not d]))
    for entry in _followed([e for e, d in zip(others, is_dir, strict=True) if d], rule,
                           ignored):
        if linked or entry.is_symlink():  # a real path to resolve
            _walk(entry.path, os.path.realpath(entry.path), rule.via_link(entry.path),
                  suffixes, rule, ignored, seen, walked)
        else:
            _walk(entry.path, os.path.join(real, entry.name), False, suffixes, rule,
                  ignored, seen, walked)


def _followed(dirs: list[os.DirEntry], rule: LinkRule, ignored: Ignored
              ) -> list[os.DirEntry]:
    """The visible sub-folders a recursive walk enters (linked ones per `rule`)."""
    keep = []
    for entry in dirs:
        if is_hidden(entry.name):
            continue
        why = rule.why_not(entry.path, entry.is_symlink())
        if why is not None:
            ignored.append((entry.path, why))
        else:
            keep.append(entry)
    return keep


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _samples(names: list[str], others: list[os.DirEntry], extensions: frozenset[str] | None,
             linked: bool, rule: LinkRule, ignored: Ignored) -> list[str]:
    """The plain sample `names` and the `others` that pass the full checks (the rest go to
    `ignored`, in name order), sorted."""
    for entry in sorted(others, key=_by_name):
        why = is_sample(entry, extensions)
        if why is None:
            why = rule.why_not(entry.path, linked or entry.is_symlink())
        if why is None:
            names.append(entry.name)
        else:
            ignored.append((entry.path, why))
    names.sort()
    return names
