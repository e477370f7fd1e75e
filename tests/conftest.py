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


# Every modality on tiny data, for checks run over all of them (resume, fingerprint, bad
# input, soak). "frames" is the video modality over extracted frame folders.
MODALITY_KINDS = ("image", "video", "frames", "hyperspectral", "fusion")
_CLIP = dict(batch_size=2, clip_length=4, stride=2, size=16)
_TINY_OPTIONS = {"image": dict(batch_size=4, size=16), "video": _CLIP, "frames": _CLIP,
                 "hyperspectral": dict(batch_size=16, patch_size=3),
                 "fusion": dict(_CLIP, imu_offset=0.25)}


class TinyData:
    """One modality's tiny data set: `one` folder, `two` folders (two sources), and the
    make_loader options that keep its batches small; `loader()` builds a loader on it."""

    def __init__(self, kind: str, one: Path, two: list[Path]):
        self.kind, self.one, self.two = kind, one, two
        self.modality = "video" if kind == "frames" else kind
        self.options = dict(_TINY_OPTIONS[kind])

    def loader(self, backend: str = "dali", data=None, **overrides):
        from torch_bridge import make_loader
        options = dict(self.options, backend=backend)
        options.update(overrides)
        if backend == "torch":  # workers cost seconds per loader; in-process unless asked
            options.setdefault("reference", {"num_workers": 0})
        return make_loader(self.modality, self.one if data is None else data, **options)


def _write_tiny(kind: str, base: Path, source: int, made: dict) -> Path:
    root, seed = base / f"{kind}_{source}", source
    if kind == "image":
        return write_image_folder(root, n_images=(10, 6)[source], n_classes=2, seed=3 * seed)
    if kind == "video":
        from bench.sample_video import small_video_folder
        return small_video_folder(root, n_videos=(5, 3)[source], n_classes=2,
                                  frames=(24, 12, 17), size=(32, 24), seed=seed)
    if kind == "frames":
        from dali_pipes.frames import extract_tree
        report = extract_tree(made["video"].two[source], root, progress=False)
        assert not report.failed, report.failed
        return root
    if kind == "hyperspectral":
        from bench.sample_hyperspectral import small_scene_folder
        small_scene_folder(root, lines=6, samples=7, bands=4, seed=seed)
        return root
    from bench.sample_fusion import small_fusion_folder
    return small_fusion_folder(root, n_videos=(5, 3)[source], size=(32, 24), seed=seed)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """`tiny_data(kind)` -> TinyData for kind in MODALITY_KINDS, written once per session."""
    made: dict[str, TinyData] = {}

    def get(kind: str) -> TinyData:
        if kind not in made:
            if kind == "frames":
                get("video")
            base = tmp_path_factory.mktemp(f"tiny_{kind}")
            two = [_write_tiny(kind, base, source, made) for source in (0, 1)]
            made[kind] = TinyData(kind, two[0], two)
        return made[kind]

    return get
