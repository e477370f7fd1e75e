"""A Hugging Face label column that is not one class per row: a list per row (multi-label)
is refused naming the column and its shape instead of being taken row by row, and a None
label is named by row instead of "got dtype float64"."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.sample_data.sample_images import encode_jpeg
from torch_bridge import make_loader

datasets = pytest.importorskip("datasets")

JPEG = encode_jpeg(np.full((8, 8, 3), 128, "uint8"))


def _loader(labels):
    ds = datasets.Dataset.from_dict({"image": [JPEG] * len(labels), "label": labels})
    return make_loader("image", ds, backend="torch", batch_size=2, image_column="image",
                       label_column="label")


def test_a_list_per_row_is_refused_with_its_shape():
    with pytest.raises(FormatError, match=r"label: labels must be one int or string per row.*"
                                          r"\(4, 2\)"):
        _loader([[0, 1], [1, 0], [0, 0], [1, 1]])


def test_a_none_label_is_named_by_row():
    with pytest.raises(FormatError, match=r"\[row 1\]: label: label is missing"):
        _loader([0, None, 1, 0])
