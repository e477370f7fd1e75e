"""COCO instance annotations (`instances_*.json`): parsed and validated into numpy arrays.

`open_coco(path)` reads the whole file once and checks every field a loader relies on;
anything wrong raises `FormatError` naming the file, the entry (image or annotation id)
and the field. Checks: malformed JSON, missing keys, wrong types, duplicate image /
annotation / category ids, annotations of unknown images or categories, boxes with a
non-positive width or height, boxes outside their image (within `BOX_TOLERANCE` pixels they
are clipped to it, beyond it they are refused), and segmentations pycocotools' rasteriser
cannot take safely (`coco_segmentation`: polygons with too few, non-finite or far-outside
coordinates, RLE whose size is not the image's or whose runs are negative or do not add up):
a bad one fails the whole file on open, as a bad box does.

Images come sorted by image id; the annotations of image i are rows
`offsets[i]:offsets[i + 1]` of the annotation arrays, sorted by annotation id. Labels are
contiguous: label k is the k-th smallest category id (`category_ids[k]`).

`decode_masks` turns segmentations (polygons, uncompressed RLE with a counts list, or
compressed RLE with a counts string) into (N, H, W) uint8 masks with pycocotools.mask.
numpy only (pycocotools is imported by `decode_masks` when it is called).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_pipes.formats.coco_segmentation import check_segmentation
from dali_pipes.formats.errors import FormatError

BOX_TOLERANCE = 1.0  # pixels a box may reach outside its image before it is refused


@dataclass(frozen=True)
class CocoDataset:
    """A validated COCO annotation file.

    Attributes:
        path: the JSON file.
        image_ids, heights, widths: int64 (I,), sorted by image id.
        file_names: (I,) file names relative to the images folder.
        offsets: int64 (I + 1,): annotations of image i are rows offsets[i]:offsets[i+1].
        ann_ids: int64 (A,); boxes: float64 (A, 4) x1, y1, x2, y2 in file pixels (clipped);
        labels: int64 (A,) contiguous ids; iscrowd: bool (A,).
        segmentations: (A,) the raw "segmentation" values (None where absent).
        category_ids: int64 (C,) sorted COCO ids (label k is category_ids[k]);
        category_names: (C,) their names.
        content_sha256: the file's hash (resume checks it).
    """

    path: str
    image_ids: np.ndarray
    file_names: tuple[str, ...]
    heights: np.ndarray
    widths: np.ndarray
    offsets: np.ndarray
    ann_ids: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray
    iscrowd: np.ndarray
    segmentations: tuple[Any, ...]
    category_ids: np.ndarray
    category_names: tuple[str, ...]
    content_sha256: str

    def __len__(self) -> int:
        return len(self.image_ids)

    def rows(self, i: int) -> slice:
        """The annotation rows of image position `i`."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


def open_coco(path: str | os.PathLike) -> CocoDataset:
    """Read and validate a COCO instances file.

    Args:
        path: the JSON file.

    Returns:
        A CocoDataset; FormatError (file, entry, field) for anything malformed.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise FormatError(path, "file", f"cannot be read ({exc.strerror or exc})") from exc
    return parse_coco(path, raw)


def parse_coco(path: str, raw: bytes) -> CocoDataset:
    """Validate the bytes `raw` of a COCO instances file (an object behind a URL, or a
    shard member, named `path` in errors), as `open_coco` validates a file."""
    import hashlib
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, "JSON", f"malformed ({type(exc).__name__}: {exc})") from exc
    return coco_document(path, doc, hashlib.sha256(raw).hexdigest())


def coco_document(path: str, doc, digest: str) -> CocoDataset:
    """Validate a parsed COCO document (`digest`: the sha256 of its bytes)."""
    if not isinstance(doc, dict):
        raise FormatError(path, "JSON", "the top level is not an object",
                          value=type(doc).__name__, expected="an object")
    for key in ("images", "annotations", "categories"):
        if not isinstance(doc.get(key), list):
            raise FormatError(path, key, "missing or not a list", value=_kind(doc.get(key)),
                              expected="a list")
    cat_ids, cat_names = _categories(path, doc["categories"])
    images = _images(path, doc["images"])
    anns = _annotations(path, doc["annotations"], images, cat_ids)
    return _assemble(path, images, anns, cat_ids, cat_names, digest)


def _kind(value) -> str:
    return "absent" if value is None else type(value).__name__


def _int(path: str, entry: str, obj: dict, key: str, *, positive: bool = False) -> int:
    value = obj.get(key)
    if key not in obj:
        raise FormatError(path, f"{entry}.{key}", "missing")
    if isinstance(value, bool) or not isinstance(value, int) or (positive and value <= 0):
        raise FormatError(path, f"{entry}.{key}", "not a valid integer", value=value,
                          expected="a positive integer" if positive else "an integer")
    return value


def _categories(path: str, entries: list) -> tuple[np.ndarray, tuple[str, ...]]:
    found: dict[int, str] = {}
    for k, cat in enumerate(entries):
        if not isinstance(cat, dict):
            raise FormatError(path, f"categories[{k}]", "not an object", value=_kind(cat))
        cid = _int(path, f"categories[{k}]", cat, "id")
        if cid in found:
            raise FormatError(path, f"categories[{k}].id", "duplicate category id", value=cid)
        name = cat.get("name", str(cid))
        if not isinstance(name, str):
            raise FormatError(path, f"category {cid}.name", "not a string", value=name)
        found[cid] = name
    ids = np.asarray(sorted(found), dtype=np.int64)
    return ids, tuple(found[int(c)] for c in ids)


def _entry_id(path: str, table: str, k: int, obj, seen) -> tuple[int, str]:
    """The id of entry `k` of `table` ("images", "annotations") and its name in errors
    ("image 7"); FormatError unless it is an object with an id not in `seen`."""
    if not isinstance(obj, dict):
        raise FormatError(path, f"{table}[{k}]", "not an object", value=_kind(obj))
    oid = _int(path, f"{table}[{k}]", obj, "id")
    entry = f"{table[:-1]} {oid}"
    if oid in seen:
        raise FormatError(path, f"{entry}.id", f"duplicate {table[:-1]} id", value=oid)
    return oid, entry


def _images(path: str, entries: list) -> dict[int, tuple[str, int, int]]:
    images: dict[int, tuple[str, int, int]] = {}
    for k, img in enumerate(entries):
        iid, entry = _entry_id(path, "images", k, img, images)
        name = img.get("file_name")
        if not isinstance(name, str) or not name:
            raise FormatError(path, f"{entry}.file_name", "missing or not a string",
                              value=name)
        images[iid] = (name, _int(path, entry, img, "height", positive=True),
                       _int(path, entry, img, "width", positive=True))
    return images


def _annotations(path: str, entries: list, images: dict, cat_ids: np.ndarray) -> list:
    known = set(cat_ids.tolist())
    seen: set[int] = set()
    out = []
    for k, ann in enumerate(entries):
        aid, entry = _entry_id(path, "annotations", k, ann, seen)
        seen.add(aid)
        iid = _int(path, entry, ann, "image_id")
        if iid not in images:
            raise FormatError(path, f"{entry}.image_id", "no image has this id", value=iid)
        cid = _int(path, entry, ann, "category_id")
        if cid not in known:
            raise FormatError(path, f"{entry}.category_id", "unknown category", value=cid,
                              expected=f"one of {sorted(known)}")
        _, h, w = images[iid]
        box = _box(path, entry, ann.get("bbox"), h, w)
        crowd = ann.get("iscrowd", 0)
        if crowd not in (0, 1) or isinstance(crowd, float):
            raise FormatError(path, f"{entry}.iscrowd", "not 0 or 1", value=crowd)
        seg = ann.get("segmentation")
        check_segmentation(path, entry, seg, h, w)
        out.append((iid, aid, box, cid, bool(crowd), seg))
    return out


def _box(path: str, entry: str, bbox, h: int, w: int) -> tuple[float, float, float, float]:
    """x1, y1, x2, y2 from COCO's [x, y, width, height], clipped within the tolerance."""
    field = f"{entry}.bbox"
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in bbox):
        raise FormatError(path, field, "not 4 finite numbers [x, y, width, height]",
                          value=bbox)
    x, y, bw, bh = (float(v) for v in bbox)
    if bw <= 0 or bh <= 0:
        raise FormatError(path, field, "non-positive width or height", value=bbox)
    x2, y2 = x + bw, y + bh
    t = BOX_TOLERANCE
    if x < -t or y < -t or x2 > w + t or y2 > h + t:
        raise FormatError(path, field, f"outside the {w}x{h} image by more than {t:g} px",
                          value=bbox)
    return max(x, 0.0), max(y, 0.0), min(x2, float(w)), min(y2, float(h))


def _assemble(path, images, anns, cat_ids, cat_names, digest) -> CocoDataset:
    order = sorted(images)
    position = {iid: i for i, iid in enumerate(order)}
    anns.sort(key=lambda a: (position[a[0]], a[1]))
    counts = np.bincount([position[a[0]] for a in anns], minlength=len(order))
    label_of = {int(c): k for k, c in enumerate(cat_ids)}
    return CocoDataset(
        path=path, image_ids=np.asarray(order, np.int64),
        file_names=tuple(images[i][0] for i in order),
        heights=np.asarray([images[i][1] for i in order], np.int64),
        widths=np.asarray([images[i][2] for i in order], np.int64),
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        ann_ids=np.asarray([a[1] for a in anns], np.int64),
        boxes=np.asarray([a[2] for a in anns], np.float64).reshape(-1, 4),
        labels=np.asarray([label_of[a[3]] for a in anns], np.int64),
        iscrowd=np.asarray([a[4] for a in anns], bool),
        segmentations=tuple(a[5] for a in anns), category_ids=cat_ids,
        category_names=cat_names, content_sha256=digest)


def empty_polygons(segmentations) -> np.ndarray:
    """bool (N,): which of N segmentations are an empty polygon list (`[]`), whose masks
    `decode_masks` gives as all zeros."""
    return np.fromiter((isinstance(seg, list) and not seg for seg in segmentations),
                       dtype=bool, count=len(segmentations))


def decode_masks(segmentations, height: int, width: int, *, path: str = "<annotations>",
                 ann_ids=None) -> np.ndarray:
    """(N, height, width) uint8 0/1 masks of N segmentations with pycocotools.mask.

    Args:
        segmentations: polygons (lists of x, y lists), uncompressed RLE (counts a list) or
            compressed RLE (counts a string), as validated by `open_coco`.
        height, width: the image's size.
        path, ann_ids: what to name in errors (a missing segmentation).

    Returns:
        A new uint8 array.
    """
    from pycocotools import mask as mask_utils
    out = np.zeros((len(segmentations), height, width), dtype=np.uint8)
    for k, seg in enumerate(segmentations):
        if seg is None:
            aid = ann_ids[k] if ann_ids is not None else k
            raise FormatError(path, f"annotation {aid}.segmentation",
                              "missing (masks=True needs one per annotation)")
        if isinstance(seg, list) and not seg:
            continue  # no polygon: an empty mask
        if isinstance(seg, list):
            rle = mask_utils.merge(mask_utils.frPyObjects(seg, height, width))
        elif isinstance(seg["counts"], list):
            rle = mask_utils.frPyObjects(seg, height, width)
        else:
            rle = {"size": seg["size"], "counts": seg["counts"].encode("ascii")}
        out[k] = mask_utils.decode(rle)
    return out
