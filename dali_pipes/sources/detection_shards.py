"""Detection samples in WebDataset shards: `<key>.<image ext>` + `<key>.json` annotations.

The JSON holds that image's COCO annotations, `{"annotations": [{"bbox": [x, y, w, h],
"category_id": int, "segmentation": ..., "iscrowd": 0|1}, ...]}` (optionally "height",
"width" and "image_id"; the pack tool writes them); the category table is one
`categories.json` beside the shards (a list of COCO category dicts, or `{"categories":
[...]}`) or the `categories` option. Each sample's annotations are validated by the COCO
reader itself (`dali_pipes.formats.coco.coco_document`, as one image of a COCO file), so
boxes, masks and labels equal those of the local folder the shards were packed from. A
sample whose JSON is malformed, whose image or annotations member is missing, or whose
boxes do not fit its image stays in the listing and fails when read (FormatError naming
`<shard>:<key>.json` and the field), under `on_error`. Without "height"/"width" in the JSON,
the image's size is read from its bytes when the source is made.
"""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from dali_pipes.formats.coco import CocoDataset, coco_document
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.sources.detection import AnnotatedImages
from dali_pipes.sources.image import check_max_pixels
from dali_pipes.sources.layout import data_layout
from dali_pipes.sources.shard_names import flatten, shard_sources
from dali_pipes.sources.shard_walk import Sample, walk_samples
from dali_pipes.sources.shards import _check_header, shard_parent
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store
from dali_pipes.stores.tar_index import IMAGE_EXTS

CATEGORIES_FILE = "categories.json"


def category_table(roots, store, categories=None) -> list:
    """The category table: `categories` when given, else `categories.json` in the first
    root (FormatError naming it when missing or not a list of objects)."""
    if categories is not None:
        where, table = "categories=", categories
    else:
        where = f"{roots[0].rstrip('/')}/{CATEGORIES_FILE}"
        try:
            stat = store.stat(where)
            raw = store.read_range(where, 0, stat[0], stat).tobytes()
            table = json.loads(raw)
        except (OSError, ValueError, RecursionError) as exc:
            raise FormatError(where, "categories", f"missing or unreadable ({exc}); detection "
                              "shards need the category table beside them (or "
                              "categories=[{'id': ..., 'name': ...}, ...])") from exc
    if isinstance(table, dict):
        table = table.get("categories")
    if not isinstance(table, list) or not all(isinstance(c, dict) for c in table):
        raise FormatError(where, "categories", "not a list of COCO category objects",
                          value=type(table).__name__, expected="[{'id': int, 'name': str}]")
    return table


class DetectionShardSource(AnnotatedImages):
    """Detection samples of WebDataset shards (see the module doc); the attributes of
    `dali_pipes.sources.detection.DetectionSource`."""

    def __init__(self, data, *, categories=None, crowd: str = "drop",
                 max_pixels: int | None = DEFAULT_MAX_PIXELS, store: Store | None = None):
        if crowd not in ("drop", "keep"):
            raise ValueError(f"crowd must be 'drop' or 'keep', got {crowd!r}")
        self.max_pixels = check_max_pixels(max_pixels)
        self.store = store or open_store(data)
        sources = shard_sources(data, self.store)
        self.multi_source = len(sources) > 1
        self.shards = tuple(flatten(sources))
        self.roots = [shard_parent(s[0], self.store) for s in sources]
        self._categories = category_table(self.roots, self.store, categories)
        self._cat_digest = hashlib.sha256(json.dumps(self._categories, sort_keys=True)
                                          .encode()).hexdigest()
        per_source = {s: k for k, source in enumerate(sources) for s in source}
        entries = []
        for shard in self.shards:
            walk = walk_samples(shard, self.store, frozenset({"json"}))
            entries += [(shard, per_source[shard], sample) for sample in walk.samples]
        if not entries:
            raise ValueError(f"{self.shards[0]}: no samples in {len(self.shards)} shard(s)")
        self._build(entries, crowd == "drop")

    def _build(self, entries, drop_crowd: bool) -> None:
        self.errors: dict[int, FormatError] = {}
        parsed: list[CocoDataset | None] = []
        for i, (shard, _, sample) in enumerate(entries):
            try:
                parsed.append(self._sample(i, shard, sample))
            except FormatError as exc:
                self.errors[i] = exc
                parsed.append(None)
        self._flatten(entries, parsed, drop_crowd)

    def _sample(self, index: int, shard: str, sample: Sample) -> CocoDataset:
        """The sample's annotations as a one-image COCO data set (FormatError otherwise)."""
        where = f"{shard}:{sample.key}.json"
        image = next((e for e in sample.members if e.lower() in IMAGE_EXTS), None)
        if image is None:
            raise FormatError(shard, f"sample {sample.key}", "no image member",
                              expected="<key>.jpg/.png/.webp/...")
        if "json" in sample.oversize:
            raise FormatError(shard, f"member {sample.key}.json", "annotations member too "
                              "large to read", expected="<= 64 MiB")
        if "json" not in sample.small:
            raise FormatError(shard, f"sample {sample.key}", "no annotations member",
                              expected="<key>.json")
        raw = sample.small["json"]
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise FormatError(where, "JSON", f"malformed ({exc})") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("annotations"), list):
            raise FormatError(where, "annotations", "missing or not a list",
                              expected='{"annotations": [...]}')
        member = sample.members[image]
        name = member[3]
        h, w = doc.get("height"), doc.get("width")
        if h is None or w is None:  # read the size from the image itself
            _, (h, w) = prepare_image(self._read_member(shard, member), name,
                                      max_pixels=self.max_pixels)
        iid = doc.get("image_id", index)
        anns = [{**a, "id": a.get("id", k + 1), "image_id": iid} if isinstance(a, dict) else a
                for k, a in enumerate(doc["annotations"])]
        coco = {"images": [{"id": iid, "file_name": name, "height": h, "width": w}],
                "annotations": anns, "categories": self._categories}
        return coco_document(where, coco, hashlib.sha256(raw).hexdigest())

    def _flatten(self, entries, parsed: list[CocoDataset | None], drop_crowd: bool) -> None:
        ok = [p for p in parsed if p is not None]
        first = ok[0] if ok else coco_document("categories", {"images": [], "annotations": [],
                                                              "categories": self._categories},
                                               "")
        self.category_ids, self.classes = first.category_ids, first.category_names
        self.files = tuple(f"{shard}:{s.members.get(_image_ext(s), (0, 0, 0, s.key))[3]}"
                           for shard, _, s in entries)
        self._members = [(shard, s.members.get(_image_ext(s))) for shard, _, s in entries]
        self.source_ids = np.asarray([src for _, src, _ in entries], np.int64)
        self.image_ids = np.asarray([p.image_ids[0] if p else i for i, p in enumerate(parsed)],
                                    np.int64)
        self.heights = np.asarray([p.heights[0] if p else 1 for p in parsed], np.int64)
        self.widths = np.asarray([p.widths[0] if p else 1 for p in parsed], np.int64)
        keeps = [(~p.iscrowd if drop_crowd else np.ones(len(p.ann_ids), bool)) if p else
                 np.zeros(0, bool) for p in parsed]
        counts = [int(k.sum()) for k in keeps]
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        pairs = [(p, k) for p, k in zip(parsed, keeps, strict=True) if p is not None]
        self.boxes = np.concatenate([np.zeros((0, 4))] + [p.boxes[k] for p, k in pairs])
        self.box_labels = np.concatenate([np.zeros(0, np.int64)] +
                                         [p.labels[k] for p, k in pairs]).astype(np.int64)
        self.iscrowd = np.concatenate([np.zeros(0, bool)] + [p.iscrowd[k] for p, k in pairs])
        self.ann_ids = np.concatenate([np.zeros(0, np.int64)] +
                                      [p.ann_ids[k] for p, k in pairs]).astype(np.int64)
        self.segmentations = tuple(seg for p, k in pairs
                                   for seg, kept in zip(p.segmentations, k, strict=True) if kept)
        self._digests = [p.content_sha256 if p else "bad" for p in parsed]
        self.labels = self._image_labels()

    def annotation_file(self, index: int) -> str:
        """`<shard>:<key>.json` of sample `index`."""
        return self.files[index].rsplit(".", 1)[0] + ".json"

    def listing_digest(self) -> str:
        """Shard names, sample names and the sha256 of every annotations member and of the
        category table."""
        digest = hashlib.sha256(self._cat_digest.encode())
        for name, member_sha in zip(self.files, self._digests, strict=True):
            digest.update(f"{os.path.basename(name)}\0{member_sha}\0".encode())
        return f"{len(self)} samples in {len(self.shards)} shards, sha256 {digest.hexdigest()}"

    def _read_member(self, shard: str, member: tuple[int, int, int, str]) -> np.ndarray:
        """A member's data, after checking that the tar header chain in front of it still
        names it (as stored: PAX and GNU long names too) and its size."""
        head, offset, size, name = member
        try:
            data = self.store.read_range(shard, head, offset - head + size)
        except EOFError as exc:
            raise FormatError(shard, f"member {name}", f"truncated shard ({exc})") from exc
        _check_header(data[:offset - head].tobytes(), shard, name,
                      name.encode("utf-8", "surrogateescape"), size)
        return data[offset - head:]

    def _bytes(self, index: int) -> np.ndarray:
        """Sample `index`'s image member; its listing error (a malformed annotations
        member, ...) first."""
        if index in self.errors:
            raise self.errors[index]
        shard, member = self._members[index]
        return self._read_member(shard, member)


def _image_ext(sample: Sample) -> str | None:
    return next((e for e in sample.members if e.lower() in IMAGE_EXTS), None)


def detection_source(data, *, annotations, categories, crowd: str, max_pixels, store):
    """The detection source `data` names: shards (`DetectionShardSource`) or images folders
    with COCO files (`DetectionSource`), in `store` (local files, URLs, a store handed in)."""
    from dali_pipes.sources.detection import DetectionSource
    if data_layout(data, store).shards:
        return DetectionShardSource(data, categories=categories, crowd=crowd,
                                    max_pixels=max_pixels, store=store)
    if categories is not None:
        raise ValueError("categories= is the category table of detection shards; an images "
                         "folder takes its categories from its COCO annotation file")
    return DetectionSource(data, annotations=annotations, crowd=crowd, max_pixels=max_pixels,
                           store=store)
