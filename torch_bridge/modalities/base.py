"""What every modality does the same way, from its index-addressable `source`."""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.schema import pixel_mean_std
from torch_bridge.protocols import Modality

# The normalisation of RGB pixels both backends apply (the DALI graphs take the same
# values from dali_pipes.schema): (x - mean) / std on the 0..255 scale, channels at dim 1.
PIXEL_MEAN, PIXEL_STD = (torch.tensor(v).view(1, 3, 1, 1) for v in pixel_mean_std())


def normalize_pixels(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 (or float) pixels (B, 3, H, W) or (B, T, 3, H, W) -> normalized float32.

    Args:
        pixels: RGB values on the 0..255 scale, channels at dim -3.

    Returns:
        A new float32 tensor on the same device.
    """
    from torch_bridge.engines._transfer import on_device  # constants copied once per device
    mean = on_device("pixel_mean", PIXEL_MEAN, pixels.device)
    std = on_device("pixel_std", PIXEL_STD, pixels.device)
    if pixels.dim() == 5:
        mean, std = mean[None], std[None]
    return (pixels.float() - mean) / std


def aug_keys(indices, keys=None) -> np.ndarray:
    """The keys random augmentation parameters are drawn from: the plan's (`keys`,
    see torch_bridge.order.plan), or the indices themselves."""
    return np.atleast_1d(np.asarray(indices if keys is None else keys, dtype=np.int64))


class SourceModality(Modality):
    """Length, file paths and the fields that bypass decoding (label, index, source_id).

    Subclasses set `self.source` (with `labels`, `source_ids`, `path(i)`, `len()`) and call
    `_set_source`; `_extra_meta` adds their own per-sample fields. The optional hooks
    (`after_batch`, `regroup`, ...) keep the defaults `Modality` declares unless overridden.
    """

    def _set_source(self, source, data) -> None:
        self.source = source
        self.multi_source = isinstance(data, (list, tuple))

    def __len__(self) -> int:
        return len(self.source)

    def path(self, index: int) -> str:
        return self.source.path(index)

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Fields that do not pass through DALI: label, index, source_id and any extras."""
        out = {"label": self.source.labels[indices], "index": np.asarray(indices, np.int64)}
        out.update(self._extra_meta(indices))
        if self.multi_source:
            out["source_id"] = self.source.source_ids[indices]
        return out

    def _extra_meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return {}

    def _read_files(self, guard, epoch: int, indices, read, keys=None
                    ) -> tuple[list, np.ndarray, np.ndarray]:
        """`read(i)` for each sample of a batch under `guard` (on_error): the reads that
        succeeded, the indices they belong to and their augmentation keys."""
        got, kept = guard.read_batch(epoch, indices, self.path, read)
        return got, np.asarray(indices, np.int64)[kept], aug_keys(indices, keys)[kept]
