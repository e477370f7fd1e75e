"""Listing folders of class folders, shared by the image, video and fusion sources."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class ClassFolderListing:
    """Files of one or more class-folder trees in a fixed order.

    Sources come in the order given; within a source, classes in sorted order and file
    names sorted within a class. Class ids index the sorted union of class names over all
    sources, so the same folder name means the same class in every source.
    """

    roots: tuple[str, ...]
    classes: tuple[str, ...]
    files: tuple[str, ...]
    labels: np.ndarray  # int64, one per file
    source_ids: np.ndarray  # int64, one per file: the position of its root in `roots`
    ignored: tuple[str, ...]  # files present but not samples (other extensions, hidden files)


def list_class_folders(data: PathLike | Sequence[PathLike], extensions: frozenset[str],
                       kind: str, *, recursive: bool = False) -> ClassFolderListing:
    """List `root/<class>/<file>` for files whose lower-case suffix is in `extensions`
    (with `recursive`, also files in sub-folders of a class folder, as torchvision's
    ImageFolder walks them: folders in sorted order, files sorted within each).

    `data` is one folder or a list of folders (one per source). Raises FileNotFoundError
    for a missing path and ValueError, naming the folder, when it is not a directory, has no
    class folders, or holds no `kind` file at all.
    """
    roots = [Path(data)] if isinstance(data, (str, os.PathLike)) else [Path(d) for d in data]
    if not roots:
        raise ValueError("data: expected a folder or a non-empty list of folders")
    per_root = [_class_dirs(root, kind) for root in roots]
    classes = sorted({name for names in per_root for name in names})
    class_id = {name: i for i, name in enumerate(classes)}
    files, labels, sources, ignored = [], [], [], []
    for source, (root, names) in enumerate(zip(roots, per_root)):
        found = _list_files(root, names, extensions, ignored, recursive)
        if not found:
            raise ValueError(f"{root}: {len(names)} class folders but no {kind} files "
                             f"(looked for {', '.join(sorted(extensions))})")
        for name, path in found:
            files.append(path)
            labels.append(class_id[name])
            sources.append(source)
    return ClassFolderListing(tuple(map(str, roots)), tuple(classes), tuple(files),
                              np.asarray(labels, dtype=np.int64),
                              np.asarray(sources, dtype=np.int64), tuple(ignored))


def _class_dirs(root: Path, kind: str) -> list[str]:
    if not root.exists():
        raise FileNotFoundError(f"{root}: data folder does not exist")
    if not root.is_dir():
        raise ValueError(f"{root}: expected a folder of class folders, found a file")
    names = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not names:
        raise ValueError(f"{root}: no class folders (expected {root}/<class>/<{kind} files>)")
    return names


def _entries(folder: Path, recursive: bool):
    if not recursive:
        yield from sorted(os.scandir(folder), key=lambda e: e.name)
        return
    tops, seen = [], set()
    for top, dirs, _ in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)  # a symlink loop is walked once, not forever
        dirs[:] = [] if real in seen else [d for d in dirs if not d.startswith(".")]
        if real not in seen:
            seen.add(real)
            tops.append(top)
    for top in sorted(tops):
        yield from sorted(os.scandir(top), key=lambda e: e.name)


def _list_files(root: Path, names: list[str], extensions: frozenset[str],
                ignored: list[str], recursive: bool = False) -> list[tuple[str, str]]:
    found = []
    for name in names:
        for entry in _entries(root / name, recursive):
            if not entry.is_file():
                continue
            if entry.name.startswith(".") or Path(entry.name).suffix.lower() not in extensions:
                ignored.append(entry.path)
                continue
            found.append((name, entry.path))
    return found
