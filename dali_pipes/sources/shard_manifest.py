"""Class names of packed shards: from the manifest the pack tool writes beside them.

`python -m dali_pipes.pack` writes `manifest.json` (or `manifest-part-I-of-N.json` per part)
with `"format": "webdataset"` and `"classes"`, the names of class ids 0, 1, ...; shards
hold only the ids. A JSON file of that name without those keys belongs to someone else and
is ignored; one with them that is unreadable or wrong is a FormatError naming it.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dali_pipes.formats.errors import FormatError


def manifest_classes(roots: Sequence[str], labels: np.ndarray) -> tuple[str, ...] | None:
    """The class names the pack tool's manifest gives for shards in the folders `roots`
    (one per source), or None: a root without one (or a URL), or sources whose manifests
    name other classes (warned: ids are then shown as numbers)."""
    found = [_read(root, labels) for root in roots]
    if not found or any(f is None for f in found):
        return None
    if any(f != found[0] for f in found[1:]):
        warnings.warn(f"the manifests of {list(roots)} name different classes; class names "
                      "are the ids", stacklevel=3)
        return None
    return found[0]


def _read(root: str, labels: np.ndarray) -> tuple[str, ...] | None:
    if "://" in root or not os.path.isdir(root):
        return None
    path = Path(root, "manifest.json")
    if not path.is_file():
        parts = sorted(Path(root).glob("manifest-part-*-of-*.json"))
        if not parts:
            return None
        path = parts[0]
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
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
