"""Arrays source: `.npy` series of shape (T, C) in class folders -> windows of rows (numpy only).

`root/<class>/<name>.npy` (sub-folders of a class belong to it, as for images), local or
behind a URL: a folder of a listable store (`s3://bucket/train/`) or a list of the files'
own URLs (`https://host/data/<class>/<name>.npy`, any store, one source per URL, the class
the file's parent folder). Every byte goes through the store layer
(`dali_pipes.stores.select.open_store`).

Every file's header is read and checked when the source is made
(`dali_pipes.formats.npy`); the data set's layout, its channel count C and dtype, is the one
most of its readable files share (a tie goes to the layout listed first), so one stray file
cannot outvote the rest. A file that fails the check, or holds another layout, stays in the
listing as a bad sample: reading it raises its FormatError (naming the file, the field and,
for another layout, both layouts), which the loader's `on_error` handles. A sample is a
window of `length` rows starting at a row drawn per (seed, epoch, key) (`window_starts`); a
series shorter than `length` gives all its rows, which the modality pads at the end with
zeros (`lengths` says how many rows are real).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

import numpy as np

from dali_pipes import schema
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.npy import HEAD_BYTES, NpyHeader, check_like, header_length, parse_header
from dali_pipes.geometry.draws import uniforms
from dali_pipes.sources.folders import PathLike, list_class_folders, listing_digest, names_in
from dali_pipes.sources.protocol import WindowRead, WindowSource
from dali_pipes.sources.remote_folders import list_remote_class_folders
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store, store_paths

EXTENSIONS = frozenset({".npy"})
STREAM_WINDOW = 13  # the random window start (independent of dali_pipes.geometry.draws's)

# The batch: the windows, padded at the end to `length` rows, with the "length" / "mask"
# fields of variable-length clips (dali_pipes.schema.LENGTHS) saying which rows are real.
ARRAYS = {
    "series": ("float32", "BTC"),  # windows of the files' rows (C channels), (x - mean) / std
    "length": ("int64", "B"),  # real rows of each window: min(T, length)
    "mask": ("bool", "BT"),  # True at real rows, False at the zero padding after them
    "label": ("int64", "B"),
    "index": ("int64", "B"),
}
ARRAYS_SCHEMA = schema.BatchSchema(ARRAYS, ("series",), clip_options=False)
# The graph's inputs: each window's real rows in the files' dtype (the graph casts, normalises
# and pads).
ARRAYS_INPUTS = (schema.Input("series", None, 2, "TC"),)


def check_length(length) -> int:
    """`length` validated: a positive int (ValueError naming the option)."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be a positive int (rows per window), got {length!r}")
    return int(length)


def window_starts(seed: int, epoch: int, keys: np.ndarray, rows: np.ndarray, length: int,
                  *, train: bool) -> np.ndarray:
    """int64 first row of each window, a pure function of (seed, epoch, key): uniform over
    the `rows - length + 1` full windows with `train`, else the centred one; 0 for a series
    of `length` rows or fewer."""
    span = np.maximum(np.asarray(rows, np.int64) - length, 0)
    if not train:
        return span // 2
    u = uniforms(seed, epoch, np.asarray(keys, np.int64), STREAM_WINDOW, 1)[:, 0]
    return np.minimum(np.floor(u * (span + 1)).astype(np.int64), span)


def majority_layout(headers: list[NpyHeader]) -> tuple[tuple[int, np.dtype], str]:
    """The layout (channels, dtype) most of `headers` share, a tie going to the one listed
    first, and how many share it, for messages (" in 9 of the 10 readable files")."""
    counts: dict[tuple[int, np.dtype], int] = {}
    for header in headers:
        layout = (header.shape[1], header.dtype)
        counts[layout] = counts.get(layout, 0) + 1
    winner = max(counts, key=counts.__getitem__)  # max keeps the first of equal counts
    return winner, f" in {counts[winner]} of the {len(headers)} readable files"


def _url_files(urls: list[str], store: Store):
    """(files, labels, source_ids, classes, sizes, versions) of a list of file URLs: the
    class is the parent folder's name, each URL its own source."""
    classes = sorted({PurePosixPath(u).parent.name for u in urls})
    labels = [classes.index(PurePosixPath(u).parent.name) for u in urls]
    stats = np.asarray([store.stat(u) for u in urls], np.int64).reshape(-1, 2)
    return (list(urls), np.asarray(labels, np.int64), np.arange(len(urls), dtype=np.int64),
            tuple(classes), stats[:, 0], stats[:, 1])


class ArraysSource(WindowSource):
    """Windows of `length` rows of the `.npy` series under `data` (one or more roots).

    Attributes: `classes`, `files`, `labels`, `source_ids`, `rows` (T per file; 0 for a bad
    file), `bad` (index -> the error reading it raises), `channels` and `dtype` (the layout
    most readable files share)."""

    def __init__(self, data: PathLike | list[PathLike], *, length: int = 64,
                 store: Store | None = None):
        self.length = check_length(length)
        self.store: Store = store or open_store(data)
        urls = store_paths(data, self.store)
        self._list(data, urls)
        self.roots = tuple(str(r).rstrip("/") if urls else os.fspath(r)
                           for r in ([data] if isinstance(data, (str, os.PathLike)) else data))
        self._scan(parallel=bool(urls))

    def _list(self, data, urls: list[str]) -> None:
        if urls and all(u.lower().endswith(".npy") for u in urls):
            (self.files, self.labels, self.source_ids, self.classes, self.sizes,
             self.versions) = _url_files(urls, self.store)
            return
        if urls:
            listing = list_remote_class_folders(urls, [self.store.list(u) for u in urls],
                                                EXTENSIONS, "arrays")
        else:
            listing = list_class_folders(data, EXTENSIONS, "arrays", recursive=True)
        self.files, self.labels, self.source_ids = (listing.files, listing.labels,
                                                    listing.source_ids)
        self.classes, self.sizes, self.versions = (listing.classes, listing.sizes,
                                                   listing.mtimes_ns)

    def _scan(self, *, parallel: bool) -> None:
        """Read every file's header; the layout most of them share sets `channels` and
        `dtype` (`majority_layout`), a file of another layout is a bad sample."""
        if parallel:
            with ThreadPoolExecutor(8) as pool:
                found = list(pool.map(self._header, range(len(self.files))))
        else:
            found = [self._header(i) for i in range(len(self.files))]
        self.bad: dict[int, Exception] = {i: h for i, h in enumerate(found)
                                          if not isinstance(h, NpyHeader)}
        good = {i: h for i, h in enumerate(found) if isinstance(h, NpyHeader)}
        if not good:
            raise self.bad[0]
        (self.channels, self.dtype), held = majority_layout(list(good.values()))
        self.rows = np.zeros(len(found), np.int64)
        self.offsets = np.zeros(len(found), np.int64)
        for i, header in good.items():
            try:
                check_like(header, self.files[i], self.channels, self.dtype, held=held)
            except FormatError as exc:
                self.bad[i] = exc
                continue
            self.rows[i], self.offsets[i] = header.shape[0], header.offset

    def _header(self, index: int) -> NpyHeader | Exception:
        path, size = self.files[index], int(self.sizes[index])
        try:
            head = self._read(index, 0, min(size, HEAD_BYTES)).tobytes()
            need = header_length(head, path) if len(head) >= 10 else len(head)
            if need > len(head) and need <= size:
                head = self._read(index, 0, need).tobytes()
            return parse_header(head, path, size)
        except (FormatError, OSError, EOFError) as exc:
            return exc

    def _read(self, index: int, offset: int, count: int) -> np.ndarray:
        return self.store.read_range(self.files[index], offset, count,
                                     (int(self.sizes[index]), int(self.versions[index])))

    def __len__(self) -> int:
        return len(self.files)

    def path(self, index: int) -> str:
        return self.files[index]

    def listing_digest(self) -> str:
        """Names (relative to their root), sizes and versions (local: mtimes) of every file."""
        return listing_digest(self.files, self.roots, self.source_ids, self.sizes,
                              self.versions)

    def valid_rows(self, indices) -> np.ndarray:
        """int64 real rows of each sample's window: min(T, length)."""
        return np.minimum(self.rows[np.asarray(indices, np.int64)], self.length)

    def read(self, index: int, request: WindowRead | None = None) -> np.ndarray:
        """Rows `start .. start + valid_rows` of sample `index`, (n, C) in `self.dtype`
        (`request.start`; None: the centred window); the file's check error for a bad
        file, EOFError naming it when it was cut since."""
        if index in self.bad:
            raise self.bad[index]
        start = request.start if request is not None else None
        if start is None:
            start = int(window_starts(0, 0, np.array([index]), self.rows[[index]],
                                      self.length, train=False)[0])
        n = int(min(self.rows[index] - start, self.length))
        row = self.channels * self.dtype.itemsize
        data = self._read(index, int(self.offsets[index]) + int(start) * row, n * row)
        return data.view(self.dtype).reshape(n, self.channels)

    def close(self) -> None:
        """Nothing is held open between reads."""
        return None


def holds_arrays(data) -> bool:
    """Whether the class folders of `data` hold `.npy` files."""
    return any(n.endswith(".npy") for n in names_in(data, 1))


__all__ = ["ARRAYS", "ARRAYS_INPUTS", "ARRAYS_SCHEMA", "ArraysSource", "EXTENSIONS",
           "STREAM_WINDOW", "check_length", "holds_arrays", "majority_layout", "window_starts"]
