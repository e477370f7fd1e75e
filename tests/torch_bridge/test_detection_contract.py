"""The loader contract on COCO detection data (torch_bridge.testing.loader_contract): order,
exactly-once, resume, sharding, sources, on_error; the backends' boxes, labels and masks
equal, images within the image modality's tolerance."""
from __future__ import annotations

import re

import pytest
import torch

from torch_bridge import registry
from torch_bridge.testing.loader_contract import LoaderContract

pytest.importorskip("pycocotools")
TARGETS = ("index", "image_id", "orig_size", "boxes", "labels", "num_boxes", "box_valid",
           "iscrowd", "dropped_boxes")


class TestDetectionContract(LoaderContract):
    kind, main, sample_shape = "detection", "image", (3, 32, 32)
    tolerance = 0.05  # as for images: two JPEG decoders and resize kernels
    exact = TARGETS  # mapped once in numpy, fed to both backends

    def break_samples(self, root, modality):
        bad = modality.path(3)
        with open(bad, "wb") as f:
            f.write(b"\xff\xd8garbage" * 8)
        return {3}, re.escape(bad), ""

    def test_schema(self, tiny, backend):
        """Every field with its dtype and rank; padding after num_boxes is 0 / False."""
        batch = next(iter(tiny.loader(backend)))
        schema = registry.get(tiny.modality).schema()
        assert set(batch) == set(schema)
        for name, (dtype, layout) in schema.items():
            assert batch[name].dtype == getattr(torch, dtype), name
            assert batch[name].dim() == len(layout), name
        assert batch["image"].shape == (4, *self.sample_shape)
        n = batch["boxes"].shape[1]
        assert n == int(batch["num_boxes"].max())
        for row, count in enumerate(batch["num_boxes"].tolist()):
            assert batch["box_valid"][row].tolist() == [True] * count + [False] * (n - count)
            assert not batch["boxes"][row, count:].any()
            assert not batch["labels"][row, count:].any()
            assert (batch["boxes"][row, :count, 2:] > batch["boxes"][row, :count, :2]).all()
        assert (batch["boxes"] >= 0).all() and (batch["boxes"] <= 32).all()
