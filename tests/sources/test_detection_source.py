"""DetectionSource: images + COCO file -> samples in image-id order, checks, digest."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_detection import write_detection_folder
from dali_pipes.sources.detection import DetectionSource

pytest.importorskip("pycocotools")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_detection_folder(tmp_path_factory.mktemp("det") / "d", n_images=6, seed=2)


def _doc(folder):
    return json.loads((folder / "instances.json").read_text())


def test_samples_in_image_id_order_with_their_boxes(folder):
    src = DetectionSource(folder)
    doc = _doc(folder)
    assert src.image_ids.tolist() == sorted(im["id"] for im in doc["images"])
    assert src.classes == ("box", "ellipse", "triangle")
    assert src.category_ids.tolist() == [1, 3, 7]
    for i, iid in enumerate(src.image_ids.tolist()):
        anns = sorted((a for a in doc["annotations"] if a["image_id"] == iid and
                       not a["iscrowd"]), key=lambda a: a["id"])
        assert src.ann_ids[src.rows(i)].tolist() == [a["id"] for a in anns]
        assert src.box_labels[src.rows(i)].tolist() == [[1, 3, 7].index(a["category_id"])
                                                        for a in anns]
        assert src.path(i).endswith(f"img_{i:04d}.jpg")
    assert src.iscrowd.sum() == 0 and len(src.ann_ids[src.rows(1)]) == 0
    assert src.labels[1] == 3  # no boxes: len(classes)


def test_crowd_keep_flags_them(folder):
    keep = DetectionSource(folder, crowd="keep")
    drop = DetectionSource(folder)
    crowd = sum(a["iscrowd"] for a in _doc(folder)["annotations"])
    assert crowd > 0 and keep.iscrowd.sum() == crowd
    assert len(keep.ann_ids) == len(drop.ann_ids) + crowd
    with pytest.raises(ValueError, match="crowd must be 'drop' or 'keep', got 'x'"):
        DetectionSource(folder, crowd="x")


def test_missing_image_is_named_with_its_id(folder, tmp_path):
    copy = shutil.copytree(folder, tmp_path / "c")
    (copy / "img_0002.jpg").unlink()
    with pytest.raises(FormatError, match=r"instances\.json: image 30\.file_name: .*img_0002"):
        DetectionSource(copy)


def test_header_size_must_match_the_annotation_file(folder, tmp_path):
    copy = shutil.copytree(folder, tmp_path / "c")
    doc = _doc(copy)
    next(im for im in doc["images"] if im["id"] == 20)["height"] += 1  # no annotations
    (copy / "instances.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"img_0001\.jpg: image size: differs"):
        DetectionSource(copy).read(1)


def test_annotations_relative_to_each_folder_and_digest_tracks_the_file(folder, tmp_path):
    copy = shutil.copytree(folder, tmp_path / "c")
    (copy / "instances.json").rename(copy / "val.json")
    src = DetectionSource(copy, annotations="val.json")
    before = src.listing_digest()
    assert before == DetectionSource(folder).listing_digest()  # same names, sizes, content
    doc = _doc(folder)
    doc["annotations"][0]["bbox"][0] += 0.5
    (copy / "val.json").write_text(json.dumps(doc))
    assert DetectionSource(copy, annotations="val.json").listing_digest() != before


def test_two_sources_share_one_label_space(folder, tmp_path):
    other = tmp_path / "o"
    shutil.copytree(folder, other)
    doc = _doc(other)
    doc["categories"].append({"id": 2, "name": "disc"})
    (other / "instances.json").write_text(json.dumps(doc))
    src = DetectionSource([folder, other])
    assert src.category_ids.tolist() == [1, 2, 3, 7] and len(src) == 12
    assert src.source_ids.tolist() == [0] * 6 + [1] * 6
    np.testing.assert_array_equal(src.box_labels[src.rows(0)], src.box_labels[src.rows(6)])
    assert set(src.box_labels.tolist()) <= {0, 2, 3}
    doc["categories"][0]["name"] = "square"
    (other / "instances.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="category 1.name: differs"):
        DetectionSource([folder, other])


def test_a_missing_annotation_file_names_the_option(tmp_path):
    from dali_pipes.sources.detection import DetectionSource
    images = tmp_path / "images"
    images.mkdir()
    with pytest.raises(FileNotFoundError, match=r"instances\.json: no COCO annotation file "
                                                r".*pass annotations="):
        DetectionSource(images)
