"""Image source over a Hugging Face `datasets.Dataset` (local Arrow / Parquet, no hub).

The image column holds encoded bytes, a `datasets.Image()` feature (read undecoded: its
stored `{"bytes", "path"}`) or file paths; the label column holds integers (a `ClassLabel`
feature gives the class names) or strings (classes: their sorted distinct values). Int
labels are checked when the source is made (FormatError naming the row and the column):
never negative, within a ClassLabel's names, and, without a ClassLabel (classes named
"0".."max label"), below `plain_label_bound`: 65,536 or the number of rows, whichever is
larger, so an id column chosen by mistake is refused instead of naming billions of classes.
Rows
are read one at a time from the dataset's Arrow table, which stays memory-mapped: a forked
worker shares the mapping, and nothing copies the table per sample. `datasets` is imported
only to check what the user passed.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.files import read_file_bytes
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.image import ImageFolderSource, ImageReads, check_max_pixels

# An int label column without a ClassLabel feature may use labels up to this bound (or the
# number of rows, when larger) whatever its number of rows (see `plain_label_bound`).
PLAIN_LABELS_ALWAYS_ALLOWED = 1 << 16


def is_hf_dataset(data: Any) -> bool:
    """Whether `data` is a `datasets.Dataset` (without importing `datasets` otherwise)."""
    if not type(data).__module__.startswith("datasets"):
        return False
    import datasets
    return isinstance(data, datasets.Dataset)


def image_source(data: Any, *, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                 image_column: str | None = None, label_column: str | None = None) -> Any:
    """The image modality's source for `data`: an HFImageSource over a `datasets.Dataset`,
    else an ImageFolderSource (where the column options are a ValueError: they name
    columns of a dataset, and class folders have none)."""
    if is_hf_dataset(data):
        return HFImageSource(data, image_column=image_column or "image",
                             label_column=label_column or "label", max_pixels=max_pixels)
    given = [name for name, value in (("image_column", image_column),
                                      ("label_column", label_column)) if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: only for data given as a datasets.Dataset, "
                         f"not folders ({data!r})")
    return ImageFolderSource(data, max_pixels=max_pixels)


class HFImageSource(ImageReads):
    """Rows of a `datasets.Dataset` as image samples, with the ImageFolderSource surface.

    Args:
        dataset: a `datasets.Dataset` (not an IterableDataset: samples are addressed by index).
        image_column: the column of encoded images (bytes, Image feature or paths).
        label_column: the column of labels (ints, ClassLabel, or strings).
        max_pixels: as for ImageFolderSource.
    """

    def __init__(self, dataset: Any, *, image_column: str = "image",
                 label_column: str = "label", max_pixels: int | None = DEFAULT_MAX_PIXELS):
        if not is_hf_dataset(dataset):
            raise TypeError(f"expected a datasets.Dataset, got {type(dataset).__name__}")
        self.name = _dataset_name(dataset)
        for option, column in (("image_column", image_column), ("label_column", label_column)):
            if column not in dataset.column_names:
                raise FormatError(self.name, option, f"no column {column!r}; columns: "
                                  + ", ".join(dataset.column_names))
        self.max_pixels = check_max_pixels(max_pixels)
        self.image_column, self.label_column = image_column, label_column
        self.dataset = dataset
        self._rows = dataset.select_columns([image_column]).with_format("arrow")
        self.labels, self.classes = _labels(dataset, label_column, self.name)
        self.source_ids = np.zeros(len(dataset), np.int64)
        self.roots, self.ignored = [self.name], 0

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, index: int) -> str:
        """The file a row's image came from where the dataset stored one, else
        `<dataset files>[row i]`."""
        value = self._value(index)
        stored = value.get("path") if isinstance(value, dict) else value
        if isinstance(stored, str) and stored:
            return stored
        return f"{self.name}[row {int(index)}]"

    def listing_digest(self) -> str:
        """The dataset's fingerprint (`datasets` derives it from its data files and every
        transform), length, columns and its Arrow files' sizes; the same for the same
        files loaded again into another cache."""
        parts = [str(getattr(self.dataset, "_fingerprint", "")), str(len(self)),
                 self.image_column, self.label_column]
        parts += [str(os.stat(entry["filename"]).st_size) for entry in self.dataset.cache_files]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _bytes(self, index: int) -> np.ndarray:
        """The row's encoded image (FormatError naming the row and the
        column for a value that holds no image; OSError naming a missing file)."""
        value = self._value(index)
        if isinstance(value, dict):
            if value.get("bytes") is not None:
                return np.frombuffer(value["bytes"], np.uint8)
            value = value.get("path")
        if isinstance(value, (bytes, bytearray)):
            return np.frombuffer(value, np.uint8)
        if isinstance(value, str) and value:
            return read_file_bytes(value)
        raise FormatError(f"{self.name}[row {int(index)}]", self.image_column,
                          f"expected encoded image bytes, an Image feature or a path, "
                          f"got {type(value).__name__}")

    def _value(self, index: int) -> Any:
        if not 0 <= int(index) < len(self):
            raise IndexError(f"{self.name}: row {index} out of range (len {len(self)})")
        return self._rows[int(index)].column(0)[0].as_py()


def _dataset_name(dataset: Any) -> str:
    files = [entry["filename"] for entry in dataset.cache_files]
    if not files:
        return f"<in-memory datasets.Dataset of {len(dataset)} rows>"
    return files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} files)"


def plain_label_bound(rows: int) -> int:
    """The exclusive bound on the labels of an int column without a ClassLabel feature:
    its classes are named "0" .. str(max label), so a label far beyond the number of rows
    (an id column chosen by mistake) would make that many names. At least
    PLAIN_LABELS_ALWAYS_ALLOWED, whatever the number of rows (a few rows of a large label
    space), else the number of rows."""
    return max(PLAIN_LABELS_ALWAYS_ALLOWED, rows)


def _check_int_labels(values: np.ndarray, column: str, name: str,
                      names: list[str] | None) -> None:
    """FormatError naming the first row whose label is negative, beyond a ClassLabel's
    names, or (without names) at or beyond `plain_label_bound`, before anything is
    allocated per class."""
    bound = len(names) if names is not None else plain_label_bound(len(values))
    bad = np.flatnonzero((values < 0) | (values >= bound))
    if not bad.size:
        return
    row, label = int(bad[0]), int(values[bad[0]])
    if label < 0:
        why = "is negative"
    elif names is not None:
        why = f"is beyond the {len(names)} names of the column's ClassLabel feature"
    else:
        why = (f"is too large for an int label column of {len(values)} rows without a "
               f"ClassLabel feature (its classes would be named 0..{label}; the limit is "
               f"{bound}): is {column!r} an id column? Choose the labels with "
               f"label_column=, or cast the column to a ClassLabel")
    raise FormatError(f"{name}[row {row}]", column, f"label {label} {why}")


def _labels(dataset: Any, column: str, name: str) -> tuple[np.ndarray, list[str]]:
    """(int64 labels, class names) of the label column."""
    values = dataset.with_format("numpy")[column] if len(dataset) else np.zeros(0, np.int64)
    values = np.asarray(values)
    feature = dataset.features[column]
    if values.ndim != 1:  # a list per row (multi-label): not one class per sample
        raise FormatError(name, column, "labels must be one int or string per row, got "
                          f"{values.ndim}-D values of shape {values.shape}")
    if values.dtype.kind == "f" and np.isnan(values).any():  # None read as NaN
        row = int(np.flatnonzero(np.isnan(values))[0])
        raise FormatError(f"{name}[row {row}]", column, "label is missing (None)")
    if values.dtype.kind in "iu":
        names = getattr(feature, "names", None)
        _check_int_labels(values, column, name, names)
        if names is not None:
            return values.astype(np.int64), list(names)
        return values.astype(np.int64), [str(k) for k in range(int(values.max(initial=-1)) + 1)]
    if values.dtype.kind in "UO":
        if any(not isinstance(v, str) for v in values):
            row = next(i for i, v in enumerate(values) if not isinstance(v, str))
            raise FormatError(f"{name}[row {row}]", column,
                              f"labels must be ints or strings, got {values[row]!r}")
        classes, labels = np.unique(values.astype(str), return_inverse=True)
        return labels.astype(np.int64), [str(c) for c in classes]
    raise FormatError(name, column, f"labels must be ints or strings, got dtype {values.dtype}")
