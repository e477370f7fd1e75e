"""Stores written outside the library, as a user would write them, for the tests that hand
them to `make_loader(..., store=...)`:

- `DictStore`: objects held in a dict (path -> (bytes, version)), with nothing but its own
  code, so any object satisfying `dali_pipes.stores.Store` is shown to be enough;
  `copy_tree` fills one from a local folder.
- `MountedStore`: the library's `LocalStore` wrapped, the files under a folder named
  `<mount>/<relative path>`: a namespace no local read can reach around the store, so equal
  batches prove that every listing and read went through it.
"""
from __future__ import annotations

import io
import itertools
import os
from pathlib import Path

import numpy as np

from dali_pipes.stores import Entry
from dali_pipes.stores.local import LocalStore

_versions = itertools.count(1)


class DictStore:
    """Objects in `objects` ({path: (bytes, version)}), shared by every copy made from it
    in this process; pickles with its objects (workers get a copy)."""

    supports_listing = True

    def __init__(self, objects: dict | None = None):
        self.objects = {} if objects is None else objects

    def put(self, path: str, data: bytes) -> None:
        self.objects[path] = (bytes(data), next(_versions))

    def list(self, prefix: str) -> list[Entry]:
        folder = prefix.rstrip("/") + "/"
        return [Entry(p, len(d), v) for p, (d, v) in sorted(self.objects.items())
                if p.startswith(folder)]

    def stat(self, path: str) -> tuple[int, int]:
        if path not in self.objects:
            raise FileNotFoundError(f"{path}: no such object")
        data, version = self.objects[path]
        return len(data), version

    def read_range(self, path: str, offset: int, size: int,
                   stat: tuple[int, int] | None = None) -> np.ndarray:
        length, version = self.stat(path)
        if stat is not None and tuple(stat) != (length, version):
            raise OSError(f"{path}: changed since it was listed")
        if offset + size > length:
            raise EOFError(f"{path}: bytes {offset}..{offset + size} requested, it has "
                           f"{length}")
        return np.frombuffer(self.objects[path][0], np.uint8, size, offset).copy()

    def open(self, path: str):
        self.stat(path)
        return io.BytesIO(self.objects[path][0])


def copy_tree(root: Path, store: DictStore, prefix: str) -> str:
    """Every file under the local folder `root` put in `store` under `prefix` (same
    relative paths); returns `prefix`."""
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            store.put(f"{prefix}/{path.relative_to(root).as_posix()}", path.read_bytes())
    return prefix


class MountedStore:
    """The local files under `root`, each named `<mount>/<path relative to root>`."""

    supports_listing = True

    def __init__(self, root, mount: str = "mnt"):
        self.root, self.mount, self.local = os.fspath(root), mount, LocalStore()

    def _real(self, path: str) -> str:
        if path != self.mount and not path.startswith(self.mount + "/"):
            raise FileNotFoundError(f"{path}: not under {self.mount}/")
        return os.path.join(self.root, path[len(self.mount) + 1:])

    def list(self, prefix: str) -> list[Entry]:
        start = len(self.root.rstrip("/")) + 1
        return [Entry(f"{self.mount}/{p[start:]}", size, version)
                for p, size, version in self.local.list(self._real(prefix))]

    def stat(self, path: str) -> tuple[int, int]:
        return self.local.stat(self._real(path))

    def read_range(self, path: str, offset: int, size: int,
                   stat: tuple[int, int] | None = None) -> np.ndarray:
        return self.local.read_range(self._real(path), offset, size, stat)

    def open(self, path: str):
        return self.local.open(self._real(path))
