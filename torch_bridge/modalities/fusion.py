"""The fusion modality: video clips plus IMU aligned to each returned frame's timestamp.

Frames, timestamps, flips and clip starts are exactly the video modality's (this class
subclasses `VideoModality`). The IMU fields are computed on the CPU from the sample's frame
timestamps with `align_to_frames` (streams read once per file and cached): on the DALI backend
in the feeding process, per sample, inside the sample guard; on the torch backend in the
DataLoader workers, in `load`. So both backends return identical "imu"/"imu_valid" values and a
missing or malformed IMU file is a per-sample failure under `on_error`.

DALI backend: the two arrays travel through the video graph as two extra `external_source`
inputs returned unchanged (no operator touches them, like "timestamps"). Riding with the
batch, rather than being attached afterwards like labels, keeps them paired with their clip
through prefetch, run-ahead across epochs, restarts and resume, because `meta()` is not told
the epoch a batch belongs to and the aligned values depend on the epoch's clip start.

Throughput against the torch reference: docs/measurements.md.

With pad="variable" the IMU is aligned to the clip's real frames only (L of them) and padded
with the batch like the video fields: zeros in "imu", False in "imu_valid".
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from dali_pipes.clip_options import ClipOptions, ImuOptions, VideoDecodeOptions
from dali_pipes.pipelines import fusion as fusion_graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.video_data import video_source
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.video import VideoModality
from torch_bridge.options import split_options


class FusionModality(VideoModality):
    """Every video option (data behind URLs and shards too: the IMU is the `<stem>.imu.csv`
    object beside each video, or the `<key>.imu.csv` member) plus `imu_offset` (seconds,
    IMU time = frame time + offset, default 0.0), `imu_method` ("linear", "slerp",
    "previous", "nearest") and `max_gap` (seconds or None)."""

    name = "fusion"
    dali_outputs = fusion_graph.OUTPUTS
    variable_outputs = fusion_graph.VARIABLE_OUTPUTS

    option_groups = (ClipOptions, VideoDecodeOptions, ImuOptions)

    def __init__(self, data, *, seed: int, device: str = "cpu", store: Store | None = None,
                 **options: Any):
        given = split_options(options, (ImuOptions,), rest=True, where="make_loader('fusion')")
        self._imu_options = dataclasses.asdict(ImuOptions(**given[ImuOptions]))
        super().__init__(data, seed=seed, device=device, store=store, **given[None])

    def _make_source(self, data, *, store: Store | None, **clip_options):
        # lists the folders once, with the IMU
        return video_source(data, store=store or open_store(data), imu=self._imu_options,
                            **clip_options)

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        out = super().meta(indices)
        out["source_id"] = self.source.source_ids[indices]  # always present for fusion
        return out

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        self._check_device(device)
        return fusion_graph.build_fusion_pipeline(device=device, batch_size=batch_size,
                                                  config=config, size=self.size,
                                                  device_id=device_id,
                                                  variable=self.variable, crop=self.crop)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, Any], np.ndarray]:
        """The video feeds plus the aligned IMU of the kept samples. IMU files are read
        first, each under the guard: a bad one skips or raises naming the sample's index and
        video (the sample's path on both backends) and, in the reason, the IMU file."""
        indices = np.asarray(indices, np.int64)
        _, good = guard.read_batch(epoch, indices, self.path, self.source.stream)
        feeds, kept = super().feeds(epoch, indices[good], guard,
                                    None if keys is None else np.asarray(keys)[good])
        if len(kept):
            aligned = [self.source.imu(i, ts)
                       for i, ts in zip(kept.tolist(), feeds["timestamps"], strict=True)]
            feeds["imu"] = [imu for imu, _ in aligned]
            feeds["imu_valid"] = [valid for _, valid in aligned]
        return feeds, kept

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        sample = super().load(epoch, index, key)
        imu, valid = self.source.imu(index, sample["timestamps"].numpy())
        sample["imu"], sample["imu_valid"] = torch.from_numpy(imu), torch.from_numpy(valid)
        return sample
