"""A data set that lists no samples at all (an annotations file with no images) is refused
at make_loader naming the data and the annotations file, not with the plan's bare
"num_samples must be positive"."""
from __future__ import annotations

import json

import pytest

from dali_pipes.sample_data.sample_detection import tiny
from torch_bridge import make_loader


def test_an_annotations_file_without_images_is_named(tmp_path):
    images = tiny(tmp_path / "det", 0)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"images": [], "annotations": [], "categories": []}))
    with pytest.raises(ValueError, match=r"empty\.json.*holds no samples"):
        make_loader("detection", str(images), annotations=str(empty), backend="torch")
