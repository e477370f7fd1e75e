"""Shared fixtures: small real JPEG data sets written into temporary folders."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.sample_data import encode_jpeg, photo_like

try:
    import torch
    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    HAS_CUDA = False


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)


def write_image_folder(root: Path, *, n_images: int, n_classes: int, seed: int = 0,
                       sizes=((90, 120), (120, 90), (100, 100), (75, 140))) -> Path:
    """`root/class_k/img_i.jpg` with a few different image sizes and orientations."""
    rng = np.random.default_rng(seed)
    for i in range(n_images):
        folder = root / f"class_{i % n_classes}"
        folder.mkdir(parents=True, exist_ok=True)
        h, w = sizes[i % len(sizes)]
        (folder / f"img_{i:04d}.jpg").write_bytes(encode_jpeg(photo_like(rng, h, w)))
    return root


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """37 JPEGs in 3 classes: not a multiple of the batch sizes the tests use."""
    return write_image_folder(tmp_path_factory.mktemp("images"), n_images=37, n_classes=3)


def undefined_quant_table(data: bytes) -> bytes:
    """A JPEG whose header passes cheap checks but that every decoder rejects: its frame
    header names quantization table 9, which is never defined."""
    out = bytearray(data)
    sof = out.index(b"\xff\xc0")
    out[sof + 12] = 9
    return bytes(out)
