"""The hyperspectral modality: scenes of ENVI/SPE cubes + label maps -> labeled patches.

Patches are read from memory maps in the feeding process (only the window's bytes) and go
into DALI in the scenes' common dtype; the graph casts to float32, normalises when asked and
applies the flips and quarter turns. The torch reference reads the same patches and applies
the same parameters with torch.flip / torch.rot90, so both backends give identical cubes.

Throughput against the torch reference and patch-read rates: docs/measurements.md.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from dali_pipes.pipelines import hyperspectral as graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.hyperspectral import HyperspectralSource, patch_augment
from dali_pipes.stores import Store
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.base import SourceModality, aug_keys


class HyperspectralModality(SourceModality):
    """Options: `patch_size` (odd, default 9), `bands` (None, band indices, or a
    `(low_nm, high_nm)` range of floats), `train` (default True: random flips and quarter
    turns; False: none) and `normalize` (default False; True: per-band mean/std of each
    scene, computed once on evenly spaced lines, subtracted and divided). `device` is the
    loader's: with a CUDA device the statistics are computed with CuPy when it is usable.
    `labels`: "map" (default: every scene has `<scene>.labels.npy`; a sample is a patch
    around a labelled pixel) or None (no label maps are read: a sample is a patch of a grid
    tiling each scene, centres every `patch_size` pixels from `patch_size // 2`, the last
    one moved back onto the last line or sample, label -1; see docs/guide.md).
    Scenes in another store than local files (`s3://bucket/scenes/`, the scenes' own
    `.hdr`/`.spe` URLs, or a `store` handed in): each patch reads only its window's byte
    ranges, through the block cache when there is one.

    The object pickles without its memory maps (the source reopens its files once per
    process), so it can be sent to spawned workers or used after a fork."""

    name = "hyperspectral"
    dali_outputs = graph.OUTPUTS

    def __init__(self, data, *, seed: int, patch_size: int = 9, bands=None,
                 train: bool = True, normalize: bool = False, device: str = "cpu",
                 store: Store | None = None, labels: Literal["map"] | None = "map"):
        for option, value in (("train", train), ("normalize", normalize)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{option} must be True or False, got {value!r}")
        self._set_source(HyperspectralSource(data, patch_size=patch_size, bands=bands,
                                             store=store, labels=labels), data)
        self.seed, self.train, self.normalize = seed, bool(train), bool(normalize)
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None
        if self.normalize:  # (scenes, n_bands, 1, 1) float32, once, before any worker starts
            stats = [self.source.band_stats(s, device=device)
                     for s in range(len(self.source.scenes))]
            self.mean = np.stack([m for m, _ in stats])[:, :, None, None]
            self.std = np.stack([s for _, s in stats])[:, :, None, None]

    def _extra_meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return {"position": self.source.positions[indices],
                "scene": self.source.scene_ids[indices]}

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_hyperspectral_pipeline(
            device=device, batch_size=batch_size, config=config, dtype=self.source.dtype,
            augment=self.train, normalize=self.normalize, device_id=device_id)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Read a batch's patches (bad ones go to the guard); parameters, vectorised."""
        patches, kept_arr, kept_keys = self._read_files(guard, epoch, indices,
                                                        self.source.read, keys)
        if not patches:
            return {}, kept_arr
        feeds = {"cube": np.stack(patches)}  # one dense (B, n_bands, P, P) array
        if self.mean is not None and self.std is not None:  # normalize=True
            scenes = self.source.scene_ids[kept_arr]
            feeds["mean"], feeds["std"] = self.mean[scenes], self.std[scenes]
        if self.train:
            flip_h, flip_v, k = patch_augment(self.seed, epoch, kept_keys, train=True)
            feeds.update(flip_h=flip_h, flip_v=flip_v, k=k)
        return feeds, kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One float32 patch, flipped and turned like the DALI graph does."""
        cube = torch.from_numpy(self.source.read(index).astype(np.float32))
        flip_h, flip_v, k = (int(a[0]) for a in patch_augment(
            self.seed, epoch, aug_keys(index, key), train=self.train))
        dims = [dim for dim, flip in ((1, flip_v), (2, flip_h)) if flip]
        if dims:
            cube = torch.flip(cube, dims)
        if k:
            cube = torch.rot90(cube, k, dims=(1, 2))
        scene = torch.tensor(int(self.source.scene_ids[index]), dtype=torch.int64)
        return {"cube": cube.contiguous(), "scene": scene}

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Batch-level work on the target device: per-band normalisation when enabled."""
        if self.normalize:
            cube, scenes = batch["cube"], batch["scene"]
            mean = torch.from_numpy(self.mean).to(cube.device)[scenes.to(cube.device)]
            std = torch.from_numpy(self.std).to(cube.device)[scenes.to(cube.device)]
            batch["cube"] = (cube - mean) / std
        return batch
