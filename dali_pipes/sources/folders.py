"""Listing folders of class folders, shared by the image, video, fusion and frame sources.

One predicate (`is_sample`) decides which directory entries are samples, and one listing
records, beside the samples, every entry it left out and why (`ignored`, `ignored_reasons`):
other extensions and hidden files, dangling symlinks, symlink loops, class folders that
cannot be read. Such folders are reported and listed around, never fatal to the whole set.
Names that are not valid UTF-8 are kept as the surrogate-escaped str `os.scandir` returns,
which every `open()` accepts; digests encode them with `os.fsencode`.

The listing reads directories only: names and entry types, one `scandir` per folder, the
common entry (a visible regular file with a sample suffix, in a folder not reached through a
symlink) taken without a call per file. Each file's size and modification time, which the
listing digest (`ClassFolderListing.digest`) hashes so that it sees files replaced under the
same name, are taken on first use (`dali_pipes.sources.file_stats`; `file_stats="listing"`:
during the listing). The paths are kept in numpy arrays
(`dali_pipes.sources.names.PathTable`), not one Python str per file.
"""
from __future__ import annotations

import hashlib
import os
import warnings
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np

from dali_pipes.sources.file_stats import FileStats, check_file_stats
from dali_pipes.sources.folder_walk import (
    Ignored,
    class_folder_samples,
    has_extension,
    is_hidden,
    is_sample,
)
from dali_pipes.sources.links import LinkRule
from dali_pipes.sources.names import PathTable, PathTableBuilder

PathLike = str | os.PathLike


def no_class_folders(root, kind: str) -> ValueError:
    """The error for a root holding no class folder."""
    return ValueError(f"{root}: no class folders (expected {root}/<class>/<{kind} files>)")


def no_samples(root, n_classes: int, kind: str, extensions: frozenset[str] | None
               ) -> ValueError:
    """The error for a root whose class folders hold no sample."""
    looked = "sample folders" if extensions is None else ", ".join(sorted(extensions))
    return ValueError(f"{root}: {n_classes} class folders but no {kind} files "
                      f"(looked for {looked})")


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
    stats: FileStats = field(default_factory=FileStats, compare=False)

    @property
    def sizes(self) -> np.ndarray:
        """int64 bytes of each file (stat'ed on first use unless taken at listing)."""
        return self.stats.get()[0]

    @property
    def mtimes_ns(self) -> np.ndarray:
        """int64 modification time of each file, in ns (as `sizes`)."""
        return self.stats.get()[1]

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
                       kind: str, *, recursive: bool = False, file_stats: str = "lazy"
                       ) -> ClassFolderListing:
    """List `root/<class>/<entry>` for entries `is_sample` accepts (with `recursive`, also
    files in sub-folders of a class folder, as torchvision's ImageFolder walks them:
    folders in sorted order, files sorted within each; a symlink loop is walked once).

    Args:
        data: one folder or a list of folders (one per source).
        extensions: sample file suffixes, or None for folder samples (see `is_sample`).
        kind: what a sample is, for messages ("image", "video", ...).
        file_stats: "lazy": each file's size and mtime are taken on first use (the
            listing reads directories only); "listing": during the listing, one `stat`
            per file (a file that cannot be stat'ed then is left out, in `ignored`).

    Returns:
        The listing. Raises FileNotFoundError for a missing path and ValueError, naming the
        folder, when it is not a directory, has no class folders, or holds no sample.
    """
    eager = check_file_stats(file_stats) == "listing"
    roots = [Path(data)] if isinstance(data, (str, os.PathLike)) else [Path(d) for d in data]
    if not roots:
        raise ValueError("data: expected a folder or a non-empty list of folders")
    ignored: Ignored = []
    rules = [LinkRule(root) for root in roots]  # symlinks: see dali_pipes.sources.links
    per_root = [_class_dirs(root, kind, ignored, rule) for root, rule in zip(roots, rules,
                                                                             strict=True)]
    classes = sorted({name for names in per_root for name, _ in names})
    class_id = {name: i for i, name in enumerate(classes)}
    found = FoundSamples(stat=eager)
    for source, (root, names, rule) in enumerate(zip(roots, per_root, rules, strict=True)):
        before = len(found.labels)
        for name, is_link in names:
            folder = os.path.join(root, name)
            _list_class(folder, is_link and rule.via_link(folder), (class_id[name], source),
                        extensions, recursive, rule, found, ignored)
        rule.warn()
        if len(found.labels) == before:
            raise no_samples(root, len(names), kind, extensions)
    return found.listing(tuple(map(str, roots)), tuple(classes), ignored)


class FoundSamples:
    """The samples found so far, in compact buffers (no Python object kept per file); the
    local and the remote (`dali_pipes.sources.remote_folders`) listings both fill one.
    `stat`: the sizes and times come with the samples (else they are taken on first use)."""

    def __init__(self, stat: bool = True) -> None:
        self.stat = stat
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

    def add_folder(self, label: int, source: int, folder: str, names: list[str],
                   stats: list[tuple[int, int]] | None = None) -> None:
        """Samples `folder/<name>` for `names`, all of class `label` and source `source`,
        with their (size, mtime_ns) when this listing takes them."""
        self.paths.add_many(folder, names)
        self.labels.extend(array("q", [label]) * len(names))
        self.sources.extend(array("q", [source]) * len(names))
        if stats is not None:
            self.sizes.extend(s for s, _ in stats)
            self.mtimes.extend(t for _, t in stats)

    def listing(self, roots: tuple[str, ...], classes: tuple[str, ...],
                ignored: Ignored) -> ClassFolderListing:
        """The listing of what was added, with the entries that are not samples (path,
        reason)."""
        files = self.paths.build()
        stats = FileStats(files, _int64(self.sizes), _int64(self.mtimes)) if self.stat \
            else FileStats(files)
        return ClassFolderListing(roots, classes, files, _int64(self.labels),
                                  _int64(self.sources), tuple(p for p, _ in ignored),
                                  tuple(r for _, r in ignored), stats)


def _int64(values: array) -> np.ndarray:
    return np.frombuffer(values, np.int64) if len(values) else np.zeros(0, np.int64)


def _class_dirs(root: Path, kind: str, ignored: Ignored,
                rule: LinkRule) -> list[tuple[str, bool]]:
    """(name, whether it is a symlink) of each class folder of `root`, sorted."""
    if not root.exists():
        raise FileNotFoundError(f"{root}: data folder does not exist")
    if not root.is_dir():
        raise ValueError(f"{root}: expected a folder of class folders, found a file")
    names = []
    with os.scandir(root) as it:  # in name order: the first of two links to one place wins
        entries = sorted(it, key=attrgetter("name"))
    for entry in entries:
        why = is_sample(entry, None)
        if why is None:
            why = rule.why_not(entry.path, entry.is_symlink())
            if why is None:
                names.append((entry.name, entry.is_symlink()))
                continue
        if why not in ("not a folder", "hidden"):
            ignored.append((entry.path, why))
    if not names:
        raise no_class_folders(root, kind)
    return sorted(names)


def _list_class(folder: str, linked: bool, label: tuple[int, int],
                extensions: frozenset[str] | None, recursive: bool, rule: LinkRule,
                found: FoundSamples, ignored: Ignored) -> None:
    """Add the samples of class folder `folder` (`label`: class id, source; `linked`:
    reached through a symlink), in listing order; an unreadable class folder is warned
    about and left out."""
    try:
        groups = class_folder_samples(folder, linked, extensions, recursive, rule, ignored)
    except OSError as exc:
        warnings.warn(f"{folder}: class folder cannot be read, left out ({exc})",
                      RuntimeWarning, stacklevel=3)
        ignored.append((folder, f"unreadable class folder: {exc.strerror or exc}"))
        return
    for top, names in groups:
        if found.stat:
            names, stats = _stat_names(top, names, ignored)
            found.add_folder(*label, top, names, stats)
        else:
            found.add_folder(*label, top, names)


def _stat_names(top: str, names: list[str], ignored: Ignored
                ) -> tuple[list[str], list[tuple[int, int]]]:
    """The `names` of folder `top` that can be stat'ed, with their (size, mtime_ns); the
    others go to `ignored` (removed or broken since the directory was read)."""
    kept, stats = [], []
    for name in names:
        path = os.path.join(top, name)
        try:
            st = os.stat(path)
        except OSError as exc:
            ignored.append((path, f"cannot stat: {exc.strerror or exc}"))
            continue
        kept.append(name)
        stats.append((st.st_size, st.st_mtime_ns))
    return kept, stats


def names_in(data, depth: int = 0) -> list[str]:
    """The file names in the (first) folder of `data` (depth 0) or in its subfolders
    (depth 1): what telling one kind of data set from another looks at. [] when it is not a
    local folder."""
    first = os.fspath(data[0] if isinstance(data, (list, tuple)) and data else data)
    try:
        top = os.listdir(first)
        if depth == 0:
            return top
        return [n for d in top if os.path.isdir(os.path.join(first, d))
                for n in os.listdir(os.path.join(first, d))]
    except (OSError, TypeError):
        return []


__all__ = ["ClassFolderListing", "FoundSamples", "PathLike", "has_extension", "is_hidden",
           "is_sample", "list_class_folders", "listing_digest", "names_in",
           "no_class_folders", "no_samples"]
