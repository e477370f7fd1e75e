"""File paths held in numpy arrays: a listing's names without one Python str per sample.

`PathTable` splits each path at its last `/` into a folder and a base name. The distinct
folders (a few per class folder) are kept once, as bytes; per path it keeps the folder's id
(int32) and the base name in one uint8 buffer with int64 end offsets. A listing of millions
of files then costs a few arrays instead of millions of objects, pickles as those arrays,
and forked workers that read it touch no reference counts, so they share its pages instead
of copying them. Indexing returns the `str` the listing was made from: names are stored as
`os.fsencode` bytes and decoded with `os.fsdecode`, so names that are not valid UTF-8 come
back as the same surrogate-escaped str `os.scandir` gave.
"""
from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

_CHUNK = 65536  # paths decoded or encoded per step of the bulk paths


class PathTable(Sequence[str]):
    """Paths as (folder id, base name) in numpy arrays; a read-only sequence of str.

    Args:
        folders: the distinct folders, as bytes ending in `/` (b"" for bare names).
        folder_ids: int32, the folder of each path.
        names: uint8, every base name (fs-encoded) concatenated.
        ends: int64, where each base name ends in `names`.
    """

    __slots__ = ("folders", "folder_ids", "names", "ends")

    def __init__(self, folders: Sequence[bytes], folder_ids: np.ndarray, names: np.ndarray,
                 ends: np.ndarray):
        self.folders = tuple(folders)
        self.folder_ids = np.asarray(folder_ids, np.int32)
        self.names = np.asarray(names, np.uint8)
        self.ends = np.asarray(ends, np.int64)
        if len(self.folder_ids) != len(self.ends):
            raise ValueError(f"PathTable: {len(self.folder_ids)} folder ids for "
                             f"{len(self.ends)} names")

    @classmethod
    def from_paths(cls, paths: Iterable[str | os.PathLike]) -> PathTable:
        """The table of `paths` (any iterable, consumed as it goes: a generator never
        exists as a list of str)."""
        builder = PathTableBuilder()
        for path in paths:
            builder.add(path)
        return builder.build()

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [os.fsdecode(self.raw(i)) for i in range(*index.indices(len(self)))]
        return os.fsdecode(self.raw(index))

    def raw(self, index) -> bytes:
        """Path `index` as the bytes it was listed with (`os.fsencode` of the str)."""
        i = int(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"path index {index} out of range for {len(self)} paths")
        start = int(self.ends[i - 1]) if i else 0
        return self.folders[self.folder_ids[i]] + self.names[start:int(self.ends[i])].tobytes()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), _CHUNK):
            yield from map(os.fsdecode, self.raw_chunk(start, min(start + _CHUNK, len(self))))

    def raw_chunk(self, lo: int, hi: int) -> list[bytes]:
        """Paths lo..hi-1 as bytes (one buffer conversion for the whole chunk)."""
        base = int(self.ends[lo - 1]) if lo else 0
        blob = self.names[base:int(self.ends[hi - 1]) if hi > lo else base].tobytes()
        ends = (self.ends[lo:hi] - base).tolist()
        starts = [0, *ends[:-1]]
        folders = self.folders
        return [folders[f] + blob[s:e] for f, s, e in
                zip(self.folder_ids[lo:hi].tolist(), starts, ends, strict=True)]

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (str, os.PathLike)) and self._find(value) >= 0

    def index(self, value, start: int = 0, stop: int | None = None) -> int:
        """The position of path `value` (ValueError when absent, as list.index)."""
        found = self._find(value, start, len(self) if stop is None else stop)
        if found < 0:
            raise ValueError(f"{value!r} is not in the listing")
        return found

    def _find(self, value, start: int = 0, stop: int | None = None) -> int:
        raw = os.fsencode(value)
        cut = raw.rfind(b"/") + 1
        if raw[:cut] not in self.folders:
            return -1
        stop = len(self) if stop is None else stop
        hits = np.flatnonzero(self.folder_ids[start:stop] == self.folders.index(raw[:cut]))
        name = raw[cut:]
        for i in (hits + start).tolist():
            lo = int(self.ends[i - 1]) if i else 0
            if self.names[lo:int(self.ends[i])].tobytes() == name:
                return i
        return -1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathTable):
            return len(self) == len(other) and list(self.raw_chunk(0, len(self))) == \
                list(other.raw_chunk(0, len(other)))
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in
                                                   zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    def __repr__(self) -> str:
        head = ", ".join(repr(p) for p in self[:2])
        return f"PathTable({len(self)} paths in {len(self.folders)} folders: {head}, ...)"

    @property
    def nbytes(self) -> int:
        """Bytes held in the arrays and the folder table."""
        return int(self.folder_ids.nbytes + self.names.nbytes + self.ends.nbytes
                   + sum(len(f) for f in self.folders))


class PathTableBuilder:
    """Grows a PathTable one path at a time in compact buffers (no str kept per path)."""

    def __init__(self) -> None:
        self._folder_id: dict[bytes, int] = {}
        self._ids = array("i")
        self._ends = array("q")
        self._names = bytearray()

    def add(self, path: str | os.PathLike) -> None:
        raw = os.fsencode(path)
        cut = raw.rfind(b"/") + 1
        self._ids.append(self._folder_id.setdefault(raw[:cut], len(self._folder_id)))
        self._names += raw[cut:]
        self._ends.append(len(self._names))

    def add_many(self, folder: str, names: list[str]) -> None:
        """Add `folder/<name>` for each of `names` (base names, in order) in one step."""
        if not names:
            return
        prefix = os.fsencode(os.path.join(folder, ""))
        fid = self._folder_id.setdefault(prefix, len(self._folder_id))
        joined = "".join(names)
        blob = os.fsencode(joined)
        lengths = np.fromiter(map(len, names) if len(blob) == len(joined) else
                              (len(os.fsencode(n)) for n in names), np.int64, len(names))
        ends = np.cumsum(lengths) + len(self._names)
        self._ids.extend(array("i", [fid]) * len(names))
        self._names += blob
        self._ends.frombytes(ends.tobytes())

    def build(self) -> PathTable:
        """The table (the builder's buffers become its arrays, without a copy)."""
        return PathTable(tuple(self._folder_id), np.frombuffer(self._ids, np.int32),
                         np.frombuffer(self._names, np.uint8),
                         np.frombuffer(self._ends, np.int64))
