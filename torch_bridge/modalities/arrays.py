"""The arrays modality: `.npy` series (T, C) in class folders -> windows of `length` rows.

The feeding process reads only each window's rows (a byte range, through the store layer);
the DALI graph casts to float32, normalises per channel when asked and pads to `length`
rows with zeros. The torch reference reads the same rows and does the same in numpy, so both
backends give identical batches. "length" (real rows) and "mask" (True at real rows) come
with every batch; the window starts are pure functions of (seed, epoch, key). See
docs/arrays.md.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dali_pipes.pipelines import arrays as graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.arrays import ArraysSource, window_starts
from dali_pipes.sources.protocol import WindowRead
from dali_pipes.stores import Store
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.base import SourceModality, aug_keys


def _per_channel(name: str, values, channels: int) -> np.ndarray | None:
    """`mean` / `std` as float32 (C,): None, a number (every channel) or C numbers."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or np.asarray(values).dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a number or {channels} numbers (one per channel), "
                         f"got {values!r}")
    try:
        out = np.broadcast_to(np.asarray(values, dtype=np.float32), (channels,)).copy()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a number or {channels} numbers (one per channel), "
                         f"got {values!r}") from exc
    if not np.isfinite(out).all() or (name == "std" and (out <= 0).any()):
        raise ValueError(f"{name} must be finite{' and positive' if name == 'std' else ''}, "
                         f"got {values!r}")
    return out


class ArraysModality(SourceModality):
    """Options: `length` (rows per window, default 64), `train` (default True: a random
    window start per sample and epoch; False: the centred window), `mean` / `std` (None, a
    number or one per channel: the series become (x - mean) / std, both or neither). `data`
    may be behind URLs or in a `store` handed in."""

    name = "arrays"
    dali_outputs = graph.OUTPUTS

    def __init__(self, data, *, seed: int, length: int = 64, train: bool = True,
                 mean: float | Sequence[float] | None = None,
                 std: float | Sequence[float] | None = None, store: Store | None = None):
        if (mean is None) != (std is None):
            raise ValueError("mean and std: give both or neither")
        self._set_source(ArraysSource(data, length=length, store=store), data)
        self.seed, self.train, self.length = seed, bool(train), self.source.length
        self.mean = _per_channel("mean", mean, self.source.channels)
        self.std = _per_channel("std", std, self.source.channels)

    def _extra_meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        lengths = self.source.valid_rows(indices)
        return {"length": lengths,
                "mask": np.arange(self.length)[None, :] < lengths[:, None]}

    def _starts(self, epoch: int, indices, keys) -> np.ndarray:
        indices = np.atleast_1d(np.asarray(indices, np.int64))
        return window_starts(self.seed, epoch, aug_keys(indices, keys),
                             self.source.rows[indices], self.length, train=self.train)

    def _window(self, index: int, start: int) -> np.ndarray:
        return self.source.read(index, WindowRead(int(start)))

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_arrays_pipeline(
            device=device, batch_size=batch_size, config=config, length=self.length,
            dtype=self.source.dtype, mean=None if self.mean is None else self.mean.tolist(),
            std=None if self.std is None else self.std.tolist(), device_id=device_id)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, list[np.ndarray]], np.ndarray]:
        """Read each sample's window of real rows (bad ones go to the guard)."""
        starts = self._starts(epoch, indices, keys)
        windows, kept = guard.read_batch(epoch, indices, self.path, self._window,
                                         keys=starts)
        kept_arr = np.asarray(indices, np.int64)[kept]
        return ({"series": windows} if windows else {}), kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One window, cast, normalised and zero-padded like the DALI graph does."""
        start = int(self._starts(epoch, index, None if key is None else [key])[0])
        rows = self._window(index, start).astype(np.float32)
        if self.mean is not None and self.std is not None:
            rows = (rows - self.mean) / self.std
        out = np.zeros((self.length, self.source.channels), np.float32)
        out[:len(rows)] = rows
        return {"series": torch.from_numpy(out)}

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return batch
