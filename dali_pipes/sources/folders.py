"""Listing folders of class folders, shared by the image, video, fusion and frame sources.

One predicate (`is_sample`) decides which directory entries are samples, and one listing
records, beside the samples, every entry it left out and why (`ignored`, `ignored_reasons`):
other extensions and hidden files, dangling symlinks, symlink loops, class folders that
cannot be read. Such folders are reported and listed around, never fatal to the whole set.
Names that are not valid UTF-8 are kept as the surrogate-escaped str `os.scandir` returns,
which every `open()` accepts; digests encode them with `os.fsencode`.

Each file's size and modification time come from the listing's own `stat`, so the listing
digest (`ClassFolderListing.digest`) sees files replaced under the same name. The paths are
kept in numpy arrays (`dali_pipes.sources.names.PathTable`), not one Python str per file.
"""
from __future__ import annotations

import functools
import hashlib
import os
import warnings
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dali_pipes.sources.links import LinkRule
from dali_pipes.sources.names import PathTable, PathTableBuilder

PathLike = str | os.PathLike


def is_hidden(name: str) -> bool:
    """Whether a directory entry named `name` is hidden (a leading dot): never a sample."""
    return name.startswith(".")


def has_extension(name: str, extensions: frozenset[str]) -> bool:
    """Whether file name `name` ends in one of `extensions` (lower-case, ".jpg"), in any case."""
    _, dot, suffix = name.rpartition(".")
    return bool(dot) and "." + suffix.lower() in extensions


def no_class_folders(root, kind: str) -> ValueError:
    """The error for a root holding no class folder."""
    return ValueError(f"{root}: no class folders (expected {root}/<class>/<{kind} files>)")


def no_samples(root, n_classes: int, kind: str, extensions: frozenset[str] | None
               ) -> ValueError:
    """The error for a root whose class folders hold no sample."""
    looked = "sample folders" if extensions is None else ", ".join(sorted(extensions))
    return ValueError(f"{root}: {n_classes} class folders but no {kind} files "
                      f"(looked for {looked})")


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


@dataclass(frozen=True)
class ClassFolderListing:
    """Files of one or more class-folder trees in a fixed order.

    Sources come in the order given; within a source, classes in sorted order and file
    names sorted within a class. Class ids index the sorted union of class names over all
    sources, so the same folder name means the same class in every source.
    """

    roots: tuple[str, ...]
    classes: tuple[str, ...]
    files: PathTable  # a sequence of str: files[i] is the path of sample i
    labels: np.ndarray  # int64, one per file
    source_ids: np.ndarray  # int64, one per file: the position of its root in `roots`
    ignored: tuple[str, ...]  # entries present but not samples
    ignored_reasons: tuple[str, ...] = ()  # why, one per `ignored` entry
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mtimes_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def digest(self) -> str:
        """The listing's identity: sample names relative to their root, with sizes and
        modification times (see `listing_digest`)."""
        return listing_digest(self.files, self.roots, self.source_ids, self.sizes,
                              self.mtimes_ns)


def listing_digest(files: Sequence[str], roots: Sequence[str], source_ids: np.ndarray,
                   sizes: np.ndarray, mtimes_ns: np.ndarray, extra: bytes = b"") -> str:
    """A listing's identity: "N files, sha256 ... (names), sizes+mtimes sha256 ...".

    Args:
        files, roots, source_ids: the samples and the root each belongs to; names are hashed
            relative to their root (so a moved data set keeps its digest), as bytes.
        sizes, mtimes_ns: int64 arrays, hashed whole.
        extra: more bytes for the second hash (e.g. label map contents, IMU file stats).

    Returns:
        The digest string (two 128-bit hex prefixes of sha256).
    """
    names = hashlib.sha256()
    prefixes = [os.path.join(os.fsencode(r), b"") for r in roots]
    for raw, source in zip(_raw_paths(files), np.asarray(source_ids).tolist(), strict=True):
        prefix = prefixes[source]
        names.update(raw[len(prefix):] if raw.startswith(prefix) else os.path.basename(raw))
        names.update(b"\0")
    stats = hashlib.sha256(np.asarray(sizes, np.int64).tobytes())
    stats.update(np.asarray(mtimes_ns, np.int64).tobytes())
    stats.update(extra)
    return (f"{len(files)} files, sha256 {names.hexdigest()[:32]} (names), sizes+mtimes "
            f"sha256 {stats.hexdigest()[:32]}")


def _raw_paths(files: Sequence[str]) -> Iterator[bytes]:
    """The paths of `files` as fs-encoded bytes (a PathTable gives them without decoding)."""
    if not isinstance(files, PathTable):
        yield from map(os.fsencode, files)
        return
    for lo in range(0, len(files), 65536):
        yield from files.raw_chunk(lo, min(lo + 65536, len(files)))


def list_class_folders(data: PathLike | Sequence[PathLike], extensions: frozenset[str] | None,
                       kind: str, *, recursive: bool = False) -> ClassFolderListing:
    """List `root/<class>/<entry>` for entries `is_sample` accepts (with `recursive`, also
    files in sub-folders of a class folder, as torchvision's ImageFolder walks them:
    folders in sorted order, files sorted within each; a symlink loop is walked once).

    Args:
        data: one folder or a list of folders (one per source).
        extensions: sample file suffixes, or None for folder samples (see `is_sample`).
        kind: what a sample is, for messages ("image", "video", ...).

    Returns:
        The listing. Raises FileNotFoundError for a missing path and ValueError, naming the
        folder, when it is not a directory, has no class folders, or holds no sample.
    """
    roots = [Path(data)] if isinstance(data, (str, os.PathLike)) else [Path(d) for d in data]
    if not roots:
        raise ValueError("data: expected a folder or a non-empty list of folders")
    ignored: list[tuple[str, str]] = []
    rules = [LinkRule(root) for root in roots]  # symlinks: see dali_pipes.sources.links
    per_root = [_class_dirs(root, kind, ignored, rule) for root, rule in zip(roots, rules,
                                                                             strict=True)]
    classes = sorted({name for names in per_root for name in names})
    class_id = {name: i for i, name in enumerate(classes)}
    found = FoundSamples()
    for source, (root, names, rule) in enumerate(zip(roots, per_root, rules, strict=True)):
        before = len(found.labels)
        _list_files(root, names, extensions, ignored, recursive,
                    functools.partial(found.add, class_id, source), rule)
        rule.warn()
        if len(found.labels) == before:
            raise no_samples(root, len(names), kind, extensions)
    return found.listing(tuple(map(str, roots)), tuple(classes), ignored)


class FoundSamples:
    """The samples found so far, in compact buffers (no Python object kept per file); the
    local and the remote (`dali_pipes.sources.remote_folders`) listings both fill one."""

    def __init__(self) -> None:
        self.paths = PathTableBuilder()
        self.labels, self.sources = array("q"), array("q")
        self.sizes, self.mtimes = array("q"), array("q")

    def add(self, class_id: dict[str, int], source: int, name: str, path: str,
            stat: tuple[int, int]) -> None:
        self.paths.add(path)
        self.labels.append(class_id[name])
        self.sources.append(source)
        self.sizes.append(stat[0])
        self.mtimes.append(stat[1])

    def listing(self, roots: tuple[str, ...], classes: tuple[str, ...],
                ignored: list[tuple[str, str]]) -> ClassFolderListing:
        """The listing of what was added, with the entries that are not samples (path,
        reason)."""
        return ClassFolderListing(roots, classes, self.paths.build(), _int64(self.labels),
                                  _int64(self.sources), tuple(p for p, _ in ignored),
                                  tuple(r for _, r in ignored), _int64(self.sizes),
                                  _int64(self.mtimes))


def _int64(values: array) -> np.ndarray:
    return np.frombuffer(values, np.int64) if len(values) else np.zeros(0, np.int64)


def _class_dirs(root: Path, kind: str, ignored: list[tuple[str, str]],
                rule: LinkRule) -> list[str]:
    if not root.exists():
        raise FileNotFoundError(f"{root}: data folder does not exist")
    if not root.is_dir():
        raise ValueError(f"{root}: expected a folder of class folders, found a file")
    names = []
    with os.scandir(root) as it:  # in name order: the first of two links to one place wins
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        why = is_sample(entry, None)
        if why is None:
            why = rule.why_not(entry.path, entry.is_symlink())
            if why is None:
                names.append(entry.name)
                continue
        if why not in ("not a folder", "hidden"):
            ignored.append((entry.path, why))
    if not names:
        raise no_class_folders(root, kind)
    return sorted(names)


def _entries(folder: str, recursive: bool, rule: LinkRule, ignored: list[tuple[str, str]]
             ) -> list[tuple[os.DirEntry, bool]]:
    """The entries of a class folder, sorted by name, each with whether a folder above it
    is reached through a symlink; with `recursive`, those of every visible sub-folder too
    (folders in sorted path order), sub-folders themselves left out, and a linked
    sub-folder only where `rule` follows it."""
    if not recursive:
        linked = rule.via_link(folder)
        with os.scandir(folder) as it:
            return [(e, linked) for e in sorted(it, key=lambda e: e.name)]
    tops, seen = [], set()
    for top, dirs, _ in os.walk(folder, followlinks=True, onerror=_raise):
        real = os.path.realpath(top)  # a symlink loop is walked once, not forever
        dirs[:] = [] if real in seen else _followed(top, dirs, rule, ignored)
        if real not in seen:
            seen.add(real)
            tops.append(top)
    out: list[tuple[os.DirEntry, bool]] = []
    for top in sorted(tops):
        linked = rule.via_link(top)
        with os.scandir(top) as it:
            out.extend((e, linked) for e in sorted(it, key=lambda e: e.name)
                       if not _is_dir(e))
    return out


def _followed(top: str, dirs: list[str], rule: LinkRule, ignored: list[tuple[str, str]]
              ) -> list[str]:
    """The visible sub-folders of `top` a recursive walk enters (linked ones per `rule`)."""
    keep = []
    for name in dirs:
        path = os.path.join(top, name)
        why = None if is_hidden(name) else rule.why_not(path, os.path.islink(path))
        if why is not None:
            ignored.append((path, why))
        elif not is_hidden(name):
            keep.append(name)
    return keep


def _raise(exc: OSError) -> None:
    raise exc


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _list_files(root: Path, names: list[str], extensions: frozenset[str] | None,
                ignored: list[tuple[str, str]], recursive: bool,
                add: Callable[[str, str, tuple[int, int]], None], rule: LinkRule) -> None:
    """Call `add(class name, path, (size, mtime_ns))` for each sample, in listing order."""
    for name in names:
        folder = os.path.join(root, name)
        try:
            entries = _entries(folder, recursive, rule, ignored)
        except OSError as exc:
            warnings.warn(f"{folder}: class folder cannot be read, left out ({exc})",
                          RuntimeWarning, stacklevel=3)
            ignored.append((folder, f"unreadable class folder: {exc.strerror or exc}"))
            continue
        for entry, linked in entries:
            why = is_sample(entry, extensions)
            if why is None:
                why = rule.why_not(entry.path, linked or entry.is_symlink())
            if why is None:
                try:
                    st = entry.stat()
                except OSError as exc:  # removed or broken since the directory was read
                    ignored.append((entry.path, f"cannot stat: {exc.strerror or exc}"))
                    continue
                add(name, entry.path, (st.st_size, st.st_mtime_ns))
            else:
                ignored.append((entry.path, why))
