"""COCO annotations with an empty segmentation (`[]`) give all-zero masks: with masks=True
(or semantic=True) the loader says so once, naming the annotation file and the count."""
from __future__ import annotations

import json
import warnings

import pytest

from dali_pipes.formats.coco import decode_masks
from dali_pipes.pack import pack
from dali_pipes.sample_data.sample_detection import tiny
from dali_pipes.sources.detection import DetectionSource
from dali_pipes.sources.detection_shards import DetectionShardSource
from torch_bridge import make_loader


@pytest.fixture(scope="module")
def emptied(tmp_path_factory):
    """Tiny COCO data whose first two polygon annotations have no polygon left."""
    root = tiny(tmp_path_factory.mktemp("empty_masks"), 0)
    coco = json.loads((root / "instances.json").read_text())
    polygons = [a for a in coco["annotations"] if isinstance(a["segmentation"], list)
                and not a["iscrowd"]]
    for ann in polygons[:2]:
        ann["segmentation"] = []
    (root / "instances.json").write_text(json.dumps(coco))
    return root


def _loader(root, **kw):
    return make_loader("detection", root, backend="torch", batch_size=4, size=32, **kw)


@pytest.mark.parametrize("option", ["masks", "semantic"])
def test_masks_of_empty_segmentations_are_announced_once(emptied, option):
    file = str(emptied / "instances.json")
    with pytest.warns(UserWarning) as caught:
        _loader(emptied, **{option: True})
    said = [str(w.message) for w in caught if "empty segmentation" in str(w.message)]
    assert said == [f"{file} (2): 2 annotation(s) have an empty segmentation ([], no "
                    f"polygon); with {option}=True their masks are all zeros"]
    assert DetectionSource(emptied).empty_segmentations() == {file: 2}
    assert not decode_masks([[]], 5, 4).any()


def test_no_word_without_masks_or_without_empty_segmentations(emptied, tmp_path):
    clean = tiny(tmp_path / "clean", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _loader(emptied)
        _loader(clean, masks=True)


def test_shards_name_each_samples_annotation_member(emptied, tmp_path):
    pack(emptied, tmp_path / "shards", modality="detection", shard_size=1 << 30,
         progress=False)
    source = DetectionShardSource(tmp_path / "shards")
    counts = source.empty_segmentations()
    assert sum(counts.values()) == 2
    assert all(".tar:" in name and name.endswith(".json") for name in counts)
    assert set(counts) <= {source.annotation_file(i) for i in range(len(source))}
