"""The detection modality: an images folder + COCO instances file -> images and targets.

Geometry (crop window, resize, flip, offset on the canvas) comes from the plan
(`dali_pipes.geometry.detection_options`, `dali_pipes.geometry.boxes`) and is applied to the
pixels by each backend: DALI decodes the window, resizes, flips, normalizes and slices the
canvas; the torch path does the same with torchvision in DataLoader workers. Boxes and masks
are mapped ONCE in numpy (`dali_pipes.geometry.boxes.map_boxes` / `resample_masks`) and
handed to both backends, so they are equal, not just close. On DALI the targets pass through
the graph and are padded there (`fn.pad`); on torch the collate pads them
(`torch_bridge.engines._collate`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dali_pipes.formats.coco import decode_masks
from dali_pipes.geometry import boxes as geo
from dali_pipes.geometry.detection_options import DetectionOptions, detection_options
from dali_pipes.pipelines import detection as graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.detection import warn_empty_masks
from dali_pipes.sources.detection_shards import detection_source
from dali_pipes.sources.options import DetectionSourceOptions
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.base import SourceModality, aug_keys, normalize_pixels
from torch_bridge.modalities.image_decode import decode_rgb
from torch_bridge.options import split_options

_TARGETS = ("boxes", "labels", "iscrowd")  # per-box fields, padded to the batch's largest


class DetectionModality(SourceModality):
    """Options: `annotations` (the COCO instances JSON; a relative path names a file in
    each images folder, default "instances.json"), `size` (the canvas: an int or (H, W),
    default 512), `train` (default True: random resized crop + flip; False: the whole image
    scaled to fit, padded), `fit` ("longer": the image fits the canvas; "shorter": shorter
    side `size`, longer side at most `max_size`, default size * 1333 / 800, canvas
    max_size x max_size), `pad_to_multiple` (round the canvas up), the training crop's
    group `crop` (`dali_pipes.geometry.boxes.DetectionCrop`, or a dict; each field also
    a flat keyword): `scale` / `ratio` (the crop window's area fraction and aspect range),
    `min_iou` (None, or box-aware crops: the first of `crop_attempts` windows whose IoU
    with some box reaches it, else the whole image), `hflip` (probability, default 0.5),
    `scale_jitter` (None, or (low, high): large-scale jitter instead of the crop);
    `min_box_size` (boxes narrower or lower than this many output pixels are dropped and
    counted in "dropped_boxes", default 1), `crowd` ("drop", default, or "keep": flagged in
    "iscrowd"), `masks` (True: "masks"
    uint8 (B, N, H, W); an annotation whose segmentation is empty, `[]`, gets an all-zero
    mask, and the loader warns once naming each such file and count), `semantic` (True:
    "semantic" uint8 (B, H, W), label + 1 of the last annotation covering each pixel, 0
    background, 255 padding) and `max_pixels` (as for images). `loader.classes` holds the
    category names in label order; `source.category_ids` their COCO ids.
    `data` may also be WebDataset shards of `<key>.<image ext>` + `<key>.json` (that image's
    COCO annotations) with `categories.json` beside them or `categories` (a list of COCO
    category dicts), and any of these behind URLs (`s3://bucket/images/` with
    `annotations="s3://bucket/instances.json"`) or in a `store` handed in."""

    name = "detection"

    # make_loader's detection options: the fields of these (`crop` a nested group)
    option_groups = (DetectionOptions, DetectionSourceOptions)

    def __init__(self, data, *, seed: int, store: Store | None = None, **options: Any):
        given = split_options(options, self.option_groups,
                              where="make_loader('detection')")
        src = DetectionSourceOptions(**given[DetectionSourceOptions])
        for option, value in (("masks", src.masks), ("semantic", src.semantic)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{option}={value!r}: expected True or False")
        self.options = detection_options(**given[DetectionOptions])
        self._set_source(detection_source(data, annotations=src.annotations,
                                          categories=src.categories, crowd=src.crowd,
                                          max_pixels=src.max_pixels,
                                          store=store or open_store(data)), data)
        self.multi_source = getattr(self.source, "multi_source", self.multi_source)
        if src.masks or src.semantic:
            warn_empty_masks(self.source, "masks=True" if src.masks else "semantic=True")
        self.seed, self.masks, self.train = seed, bool(src.masks), self.options.train
        self.semantic = bool(src.semantic)
        if self.semantic and len(self.source.classes) > 254:
            raise ValueError(f"semantic=True holds labels + 1 in uint8 with 255 for padding: "
                             f"at most 254 categories, the data has "
                             f"{len(self.source.classes)}")
        self.canvas = self.options.canvas
        self.category_ids = self.source.category_ids
        self.padded_fields = _TARGETS + (("masks",) if self.masks else ())

    @property
    def dali_outputs(self) -> tuple[str, ...]:
        return graph.outputs(self.masks, self.semantic)

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        src = self.source
        out = {"index": np.asarray(indices, np.int64), "image_id": src.image_ids[indices],
               "orig_size": np.stack([src.heights[indices], src.widths[indices]], axis=1)}
        if self.multi_source:
            out["source_id"] = src.source_ids[indices]
        return out

    # shared by both backends -----------------------------------------------------------
    def _read(self, index: int) -> tuple[np.ndarray, tuple[int, int], np.ndarray | None]:
        """Checked bytes, (h, w) and, with masks, the file-size masks (FormatError names
        the annotation file for a missing or undecodable segmentation)."""
        data, hw = self.source.read(index)
        if not (self.masks or self.semantic):
            return data, hw, None
        rows = self.source.rows(index)
        return data, hw, decode_masks(self.source.segmentations[rows], *hw,
                                      path=self.source.annotation_file(index),
                                      ann_ids=self.source.ann_ids[rows])

    def geometry(self, epoch: int, indices, keys) -> geo.Geometry:
        """The geometry of a batch of dataset indices (their plan keys: `keys`)."""
        idx = np.asarray(indices, np.int64)
        src = self.source
        return self.options.geometry(self.seed, epoch, aug_keys(idx, keys), src.heights[idx],
                                     src.widths[idx],
                                     [src.boxes[src.rows(int(i))] for i in idx])

    def targets(self, index: int, geometry: geo.Geometry, full_masks=None
                ) -> dict[str, np.ndarray]:
        """Sample `index`'s targets under its geometry (a batch of one)."""
        rows = self.source.rows(index)
        boxes, keep = geo.map_boxes(self.source.boxes[rows], geometry,
                                    min_box_size=self.options.min_box_size)
        labels = self.source.box_labels[rows]
        out = {"boxes": boxes, "labels": labels[keep],
               "iscrowd": self.source.iscrowd[rows][keep],
               "dropped_boxes": np.int64((~keep).sum())}
        if full_masks is None:
            return out
        if self.semantic:  # every annotation paints, also those too small to be a box
            masks = geo.resample_masks(full_masks, geometry)
            out["semantic"] = geo.semantic_map(masks, labels, geometry)
            if self.masks:
                out["masks"] = np.ascontiguousarray(masks[keep])
        else:
            out["masks"] = geo.resample_masks(full_masks[keep], geometry)
        return out

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_detection_pipeline(device=device, batch_size=batch_size,
                                              canvas=self.canvas, config=config,
                                              masks=self.masks, semantic=self.semantic,
                                              device_id=device_id)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, Any], np.ndarray]:
        """Read and check a batch's files; geometry vectorised, targets per sample."""
        got, kept_arr, kept_keys = self._read_files(guard, epoch, indices, self._read, keys)
        if not got:
            return {}, kept_arr
        g = self.geometry(epoch, kept_arr, kept_keys)
        targets = [self.targets(int(i), g.row(k), got[k][2]) for k, i in enumerate(kept_arr)]
        out: dict[str, Any] = {
            "images": [data for data, _, _ in got],
            "anchor": np.ascontiguousarray(g.window[:, :2], np.int32),
            "shape": np.ascontiguousarray(g.window[:, 2:], np.int32),
            "resized": g.resized.astype(np.float32), "offset": g.offset.astype(np.int32),
            "mirror": g.flip.astype(np.int32),
            "boxes": [t["boxes"] for t in targets], "labels": [t["labels"] for t in targets],
            "box_valid": [np.ones(len(t["labels"]), bool) for t in targets],
            "iscrowd": [t["iscrowd"] for t in targets],
            "num_boxes": np.asarray([len(t["labels"]) for t in targets], np.int64),
            "dropped_boxes": np.asarray([t["dropped_boxes"] for t in targets], np.int64)}
        if self.masks:
            out["masks"] = [t["masks"] for t in targets]
        if self.semantic:
            out["semantic"] = np.stack([t["semantic"] for t in targets])
        return out, kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One sample: uint8 (3, H, W) canvas (0 outside "content"), its targets."""
        from torchvision.transforms.v2 import functional as F

        data, _, full_masks = self._read(index)
        g = self.geometry(epoch, [index], None if key is None else [key])
        top, left, h, w = g.window[0].tolist()
        rh, rw = g.resized[0].tolist()
        oy, ox = g.offset[0].tolist()
        ch, cw = g.content()[0].tolist()
        image = decode_rgb(data)[:, top:top + h, left:left + w]
        image = F.resize(image, [rh, rw], interpolation=F.InterpolationMode.BILINEAR,
                         antialias=True)
        if g.flip[0]:
            image = image.flip(-1)
        canvas = torch.zeros((3, *self.canvas), dtype=torch.uint8)
        canvas[:, :ch, :cw] = image[:, oy:oy + ch, ox:ox + cw]
        out = {"image": canvas, "content": torch.tensor([ch, cw], dtype=torch.int64)}
        for name, value in self.targets(index, g, full_masks).items():
            out[name] = torch.as_tensor(np.ascontiguousarray(value) if np.ndim(value) else
                                        np.asarray(value))
        return out

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Normalize (0 outside each image's content, as DALI pads) and name the collate's
        lengths and masks as the DALI graph does ("num_boxes", "box_valid")."""
        content = batch.pop("content")
        image = normalize_pixels(batch["image"])
        h, w = image.shape[-2:]
        rows = torch.arange(h, device=image.device)[None, :] < content[:, :1]
        cols = torch.arange(w, device=image.device)[None, :] < content[:, 1:]
        batch["image"] = image * (rows[:, None, :, None] & cols[:, None, None, :])
        batch["num_boxes"] = batch.pop("length")
        batch["box_valid"] = batch.pop("mask")
        return batch
