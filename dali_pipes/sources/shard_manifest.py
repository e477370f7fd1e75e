"""Class names of packed shards: from the manifest the pack tool writes beside them.

`python -m dali_pipes.pack` writes `manifest.json` (or `manifest-part-I-of-N.json` per part)
with `"format": "webdataset"` and `"classes"`, the names of class ids 0, 1, ...; shards
hold only the ids. A JSON file of that name without those keys belongs to someone else and
is ignored; one with them that is unreadable or wrong is a FormatError naming it. Shards in
another store than local files (URLs, a store handed in) have their manifest read through
that store.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.stores import Store
from dali_pipes.stores.select import can_list, local_files


def manifest_classes(roots: Sequence[str], labels: np.ndarray, store: Store | None = None
                     ) -> tuple[str, ...] | None:
    """The class names the pack tool's manifest gives for shards in the folders `roots`
    (one per source, in `store`: default local files), or None: a root without one, or
    sources whose manifests name other classes (warned: ids are then shown as numbers)."""
    if store is not None and not local_files(store):
        found = [_parse(*_stored(root, store), labels) for root in roots]
    else:
        found = [_read(root, labels) for root in roots]
    if not found or any(f is None for f in found):
        return None
    if any(f != found[0] for f in found[1:]):
        warnings.warn(f"the manifests of {list(roots)} name different classes; class names "
                      "are the ids", stacklevel=3)
        return None
    return found[0]


def _read(root: str, labels: np.ndarray) -> tuple[str, ...] | None:
    if not os.path.isdir(root):
        return None
    path = Path(root, "manifest.json")
    if not path.is_file():
        parts = sorted(Path(root).glob("manifest-part-*-of-*.json"))
        if not parts:
            return None
        path = parts[0]
    try:
        text = path.read_text()
    except OSError as exc:
        raise FormatError(path, "manifest", f"not readable ({exc})") from exc
    return _parse(str(path), text, labels)


def _stored(root: str, store: Store) -> tuple[str, str | None]:
    """(path, text) of the manifest in the folder `root` of `store` (text None: none)."""
    path = f"{root}/manifest.json"
    try:
        size, version = store.stat(path)
    except FileNotFoundError:
        try:
            listed = store.list(root) if can_list(store) else []
        except ValueError:  # a folder this store cannot list (http(s))
            listed = []
        parts = sorted(p for p, _, _ in listed if _PART.match(p[len(root) + 1:]))
        if not parts:
            return path, None
        path = parts[0]
        size, version = store.stat(path)
    data = store.read_range(path, 0, size, (size, version))
    return path, data.tobytes().decode("utf-8", "replace")


_PART = re.compile(r"^manifest-part-[^/]*-of-[^/]*\.json$")


def _parse(path: str, text: str | None, labels: np.ndarray) -> tuple[str, ...] | None:
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise FormatError(path, "manifest", f"not readable JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != "webdataset" \
            or "classes" not in manifest:
        return None
    classes = manifest["classes"]
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise FormatError(path, "classes", "not a list of class names",
                          value=type(classes).__name__, expected="a list of strings")
    top = int(labels.max()) if len(labels) else -1
    if top >= len(classes):
        raise FormatError(path, "classes", f"names {len(classes)} classes, the shards hold "
                          f"label {top}", value=len(classes), expected=f"> {top}")
    return tuple(classes)
