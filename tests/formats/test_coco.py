"""COCO instances files: parsing into arrays, every refusal naming file, entry and field,
and masks decoded like pycocotools' own COCO reader decodes them."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.formats.coco import decode_masks, open_coco
from dali_pipes.sample_data.sample_detection import write_detection_folder

pytest.importorskip("pycocotools")

DOC = {
    "images": [{"id": 7, "file_name": "b.jpg", "height": 40, "width": 60},
               {"id": 3, "file_name": "a.jpg", "height": 30, "width": 20}],
    "annotations": [
        {"id": 12, "image_id": 7, "category_id": 9, "bbox": [1, 2, 10, 20], "iscrowd": 0},
        {"id": 5, "image_id": 7, "category_id": 2, "bbox": [50.5, 0, 10, 5], "iscrowd": 1},
        {"id": 8, "image_id": 3, "category_id": 9, "bbox": [-0.5, 1, 5, 5]}],
    "categories": [{"id": 9, "name": "cat"}, {"id": 2, "name": "dog"}],
}


def _write(tmp_path, doc) -> str:
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_images_sorted_by_id_annotations_grouped_labels_contiguous(tmp_path):
    coco = open_coco(_write(tmp_path, DOC))
    assert coco.image_ids.tolist() == [3, 7] and coco.file_names == ("a.jpg", "b.jpg")
    assert coco.heights.tolist() == [30, 40] and coco.widths.tolist() == [20, 60]
    assert coco.offsets.tolist() == [0, 1, 3]
    assert coco.ann_ids.tolist() == [8, 5, 12]  # by image, then by annotation id
    assert coco.category_ids.tolist() == [2, 9] and coco.category_names == ("dog", "cat")
    assert coco.labels.tolist() == [1, 0, 1]
    assert coco.iscrowd.tolist() == [False, True, False]
    # xywh -> xyxy; boxes reaching out by <= 1 px are clipped to the image
    np.testing.assert_array_equal(coco.boxes, [[0, 1, 4.5, 6], [50.5, 0, 60, 5],
                                               [1, 2, 11, 22]])


def _edited(edit):
    doc = copy.deepcopy(DOC)
    edit(doc)
    return doc


@pytest.mark.parametrize("edit, field, message", [
    (lambda d: d.pop("annotations"), "annotations", "missing"),
    (lambda d: d["images"].append(dict(d["images"][0])), "image 7.id", "duplicate"),
    (lambda d: d["annotations"].append(dict(d["annotations"][0])), "annotation 12.id",
     "duplicate"),
    (lambda d: d["categories"].append({"id": 9, "name": "x"}), r"categories\[2\].id",
     "duplicate"),
    (lambda d: d["annotations"][0].update(category_id=4), "annotation 12.category_id",
     "unknown category"),
    (lambda d: d["annotations"][0].update(image_id=99), "annotation 12.image_id", "no image"),
    (lambda d: d["annotations"][0].update(bbox=[1, 2, 0, 20]), "annotation 12.bbox",
     "non-positive"),
    (lambda d: d["annotations"][0].update(bbox=[1, 2, -3, 20]), "annotation 12.bbox",
     "non-positive"),
    (lambda d: d["annotations"][0].update(bbox=[55, 2, 10, 20]), "annotation 12.bbox",
     "outside the 60x40 image"),
    (lambda d: d["annotations"][0].update(bbox=[1, 2, 10]), "annotation 12.bbox", "4 finite"),
    (lambda d: d["annotations"][0].pop("bbox"), "annotation 12.bbox", "4 finite"),
    (lambda d: d["annotations"][0].pop("image_id"), "annotation 12.image_id", "missing"),
    (lambda d: d["images"][0].update(height=0), "image 7.height", "not a valid integer"),
    (lambda d: d["images"][0].pop("file_name"), "image 7.file_name", "missing"),
    (lambda d: d["annotations"][0].update(iscrowd=2), "annotation 12.iscrowd", "not 0 or 1"),
    (lambda d: d["annotations"][0].update(segmentation=[[1, 2, 3]]),
     r"annotation 12.segmentation\[0\]", "polygon"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [1, 1], "counts": "a"}),
     "annotation 12.segmentation.size", "image's"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": [5]}),
     "annotation 12.segmentation.counts", "add up"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, 1e12, 0, 0, 1e12]]),
     r"annotation 12.segmentation\[0\]", "outside the 60x40 image"),
    (lambda d: d["annotations"][0].update(segmentation=[[1, 1, 5, 1, 5, 5], [0, 0, -61, 5, 3, 5]]),
     r"annotation 12.segmentation\[1\]", "outside the 60x40 image"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, 5, 81, 3, 7]]),
     r"annotation 12.segmentation\[0\]", "outside"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, float("nan"), 5, 3, 7]]),
     r"annotation 12.segmentation\[0\]", "not all finite"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, float("inf"), 5, 3, 7]]),
     r"annotation 12.segmentation\[0\]", "not all finite"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, 5, 5, 3, 7, 1]]),
     r"annotation 12.segmentation\[0\]", "polygon"),
    (lambda d: d["annotations"][0].update(segmentation=[[0, 0, "5", 5, 3, 7]]),
     r"annotation 12.segmentation\[0\]", "polygon"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60],
                                                        "counts": [-5, 2405]}),
     "annotation 12.segmentation.counts", "non-negative integer"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60],
                                                        "counts": [2400.5, -0.5]}),
     "annotation 12.segmentation.counts", "non-negative integer"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40.0, 60.0],
                                                        "counts": [2400]}),
     "annotation 12.segmentation.size", "image's"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": "zzzz"}),
     "annotation 12.segmentation.counts", "outside '0'..'o'"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": "0"}),
     "annotation 12.segmentation.counts", "add up"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": "1n"}),
     "annotation 12.segmentation.counts", "cut short"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": "@"}),
     "annotation 12.segmentation.counts", "negative run"),
    (lambda d: d["annotations"][0].update(segmentation={"size": [40, 60], "counts": 7}),
     "annotation 12.segmentation.counts", "not an RLE string or list"),
])
def test_refusals_name_file_entry_and_field(tmp_path, edit, field, message):
    path = _write(tmp_path, _edited(edit))
    with pytest.raises(FormatError, match=rf"instances\.json: {field}: .*{message}"):
        open_coco(path)


def test_malformed_json_and_wrong_top_level(tmp_path):
    path = tmp_path / "instances.json"
    path.write_text('{"images": [')
    with pytest.raises(FormatError, match=r"instances\.json: JSON: malformed"):
        open_coco(path)
    path.write_text("[]")
    with pytest.raises(FormatError, match="JSON: the top level is not an object"):
        open_coco(path)
    with pytest.raises(FormatError, match="cannot be read"):
        open_coco(tmp_path / "absent.json")


def test_masks_equal_pycocotools_reader(tmp_path):
    """Polygons, compressed and uncompressed RLE decode as pycocotools.coco.COCO's own
    annToMask decodes them (a third-party reader of the same file)."""
    from pycocotools.coco import COCO
    root = write_detection_folder(tmp_path / "d", n_images=6, seed=1)
    coco = open_coco(root / "instances.json")
    reference = COCO(str(root / "instances.json"))
    kinds = set()
    for i in range(len(coco)):
        rows = coco.rows(i)
        segs = coco.segmentations[rows]
        kinds |= {"polygon" if isinstance(s, list) else "rle-" + type(s["counts"]).__name__
                  for s in segs}
        got = decode_masks(segs, int(coco.heights[i]), int(coco.widths[i]))
        want = [reference.annToMask(reference.anns[int(a)]) for a in coco.ann_ids[rows]]
        assert got.shape == (len(want), coco.heights[i], coco.widths[i])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_allclose(coco.boxes[rows],
                                   np.reshape([_xyxy(reference.anns[int(a)]["bbox"])
                                               for a in coco.ann_ids[rows]], (-1, 4)))
    assert kinds == {"polygon", "rle-str", "rle-list"}


def _xyxy(b):
    return [b[0], b[1], b[0] + b[2], b[1] + b[3]]


def test_an_empty_polygon_list_is_an_empty_mask():
    assert decode_masks([[]], 3, 5).tolist() == [[[0] * 5] * 3]


def test_missing_segmentation_is_named_when_masks_are_decoded():
    with pytest.raises(FormatError, match="annotation 42.segmentation: missing"):
        decode_masks([None], 4, 4, path="x.json", ann_ids=[42])


def test_polygons_reaching_one_image_size_out_and_rle_at_the_bounds_are_accepted(tmp_path):
    """The bounds are inclusive: x in [-w, 2w], y in [-h, 2h] (the part inside the image is
    the mask), zero-length runs (an RLE may start with one) are fine."""
    doc = copy.deepcopy(DOC)
    doc["annotations"][0]["segmentation"] = [[-60, -40, 120, -40, 120, 80, -60, 80]]
    doc["annotations"][1]["segmentation"] = {"size": [40, 60], "counts": [0, 2400]}
    coco = open_coco(_write(tmp_path, doc))
    assert decode_masks(coco.segmentations[2:3], 40, 60).sum() == 2400
    assert decode_masks(coco.segmentations[1:2], 40, 60).sum() == 2400


def test_compressed_rle_counts_match_pycocotools_encoding():
    """The string decoder reads what pycocotools writes: random masks, including ones
    with runs of thousands (several characters a number) and deltas of both signs."""
    from pycocotools import mask as mask_utils

    from dali_pipes.formats.coco_segmentation import rle_string_counts
    rng = np.random.default_rng(0)
    for h, w, p in ((40, 60, 0.5), (300, 200, 0.002), (1, 1, 1.0), (50, 70, 0.97)):
        m = (rng.random((h, w)) < p).astype(np.uint8)
        m[h // 3:, : w // 2] = 1
        rle = mask_utils.encode(np.asfortranarray(m))
        runs = rle_string_counts("x", "counts", rle["counts"].decode("ascii"))
        flat = np.repeat(np.arange(len(runs)) % 2, runs).astype(np.uint8)
        np.testing.assert_array_equal(flat.reshape(w, h).T, m)
