"""`modality="video"` over a frame-folder tree (`python -m dali_pipes.frames extract`), local,
as class folders behind URLs (`s3://bucket/train/<class>/<clip>/`) or packed into shards
(`python -m dali_pipes.pack --modality frames`; `dali_pipes.sources.frame_stores`), in any
store, as for videos.

Same options, batch schema and clip sampling as `VideoModality` ("frames" (B, T, 3, H, W)
float32 normalized, "timestamps" (B, T) float64, "label", "index"); `make_loader` picks this
class when `data` holds frame folders (`dali_pipes.sources.frame_data.is_frame_data`). DALI
backend: the source reads the clip's JPEG files, the batch's B x T frames go flat through
one decoder (nvJPEG / the hardware JPEG decoder with `mixed` on the GPU), resize and flip /
normalize
(`dali_pipes.pipelines.video_frames`), and `regroup` (called by `transfer.attach_meta`)
makes the (B, T, ...) clips; a failing batch is decoded clip by clip (`sample_feeds`) to
name the culprit. Torch backend: `torchvision.io.decode_jpeg`, antialiased bilinear resize and
the same flip in the workers; normalization in `finish`. With `size=None` the native
resolution is kept: every frame of a batch must share it, or ValueError names the files
(the DALI feeds read each JPEG's frame header; the torch path compares decoded shapes).
With pad="variable" a clip feeds only the frames it has; `regroup` pads every clip to the
batch's longest with zeros and adds "length" and "mask". With resize="short_side" the
clip's window (from the plan, read from the first frame's size; every frame of the clip
must share it) goes to the graph as "crop_start" / "crop_end" per frame, and the resize
reads only that window; the torch path resizes and crops with `clip_resize.resize_crop`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dali_pipes.pipelines import video_frames as graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.frame_data import frame_source
from dali_pipes.sources.protocol import ClipRead
from dali_pipes.sources.video_frames import FrameFolderSource
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.clip_resize import crop_feeds, roi_feeds
from torch_bridge.modalities.video import ClipModality


class FrameFolderModality(ClipModality):
    """Options as `VideoModality` (the fields of `dali_pipes.clip_options.ClipOptions`):
    clip_length, stride, size, train, clips_per_video, pad, resize, short_side, views
    (docs/video_crops.md)."""

    name = "video"
    dali_outputs, variable_outputs = graph.OUTPUTS, graph.VARIABLE_OUTPUTS
    source_class = FrameFolderSource

    def __init__(self, data, *, seed: int, store: Store | None = None, **options: Any):
        super().__init__(data, seed=seed, store=store, **options)
        self.multi_source = getattr(self.source, "multi_source", self.multi_source)

    def _make_source(self, data, *, store: Store | None, **clip_options):
        return frame_source(data, store=store or open_store(data), **clip_options)

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_frames_pipeline(device=device, batch_size=batch_size,
                                           config=config, size=self.size,
                                           clip_length=self.source.clip_length,
                                           device_id=device_id, variable=self.variable,
                                           crop=self.crop)

    # One decoder over the batch's B x T frames, regrouped into clips by `regroup` ---------

    def _read(self, epoch: int, index: int, key: int | None = None) -> dict:
        frames = self.clip(epoch, index, key)
        jpegs, sizes = self.source.read(index, ClipRead(frames))
        sample = {"jpegs": jpegs, "hw": None,
                  "timestamps": self.source.timestamps(index, frames)}
        if self.size is None or self.crop:  # one size per clip, from the headers
            sample["hw"] = hw = self._clip_resolution(index, frames, sizes)
            window = self.window(epoch, index, key, hw)
            if window is not None:
                sample.update(roi_feeds(window, hw, self.size))
        return sample

    def _frame_path(self, index: int, frame: int) -> str:
        return self.source.frame_path(index, frame)

    def _clip_resolution(self, index: int, frames, sizes: list[tuple[int, int]]):
        """The clip's one (H, W); ValueError naming the frames when they differ."""
        if len(set(sizes)) > 1:
            listed = ", ".join(f"{self._frame_path(index, k)} is {h}x{w}"
                               for k, (h, w) in list(zip(frames, sizes, strict=True))[:6])
            if self.crop:
                raise ValueError(f"resize='short_side' cuts one window for the whole clip, "
                                 f"so every frame of a clip must share its size: {listed}")
            raise ValueError(f"size=None keeps native resolution, so every frame of a clip "
                             f"must share it: {listed}; pass size=(H, W) to resize")
        return sizes[0]

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, Any], np.ndarray]:
        """The batch's frames flat, one graph sample per frame (see the graph's inputs):
        every frame a clip has (T with pad="repeat_last", its own length with "variable")."""
        samples, kept_arr, mirror = self._read_clips(epoch, indices, guard, keys)
        if not samples:
            return {}, kept_arr
        lengths = np.array([len(s["jpegs"]) for s in samples])
        return {**crop_feeds(samples, self.crop, lengths),
                "jpegs": [data for s in samples for data in s["jpegs"]],
                "mirror": np.repeat(mirror.astype(np.int32), lengths),
                "timestamps": np.concatenate([s["timestamps"] for s in samples]
                                             ).astype(np.float64),
                "clip": np.repeat(np.arange(len(samples), dtype=np.int32), lengths)}, kept_arr

    def sample_feeds(self, feeds: dict[str, Any], position: int) -> dict[str, list]:
        """The feeds of the batch's clip at `position` alone (to decode it by itself when a
        batch fails and the culprit must be named)."""
        rows = np.flatnonzero(np.asarray(feeds["clip"]) == position)
        out = {name: [values[r] for r in rows] for name, values in feeds.items()}
        out["clip"] = [np.int32(0)] * len(rows)
        return out

    def regroup(self, batch: dict[str, torch.Tensor], n_clips: int) -> dict[str, torch.Tensor]:
        """Per-frame graph outputs -> the clip batch (a no-op for batches without "clip",
        e.g. the torch backend's). Padded positions are exactly 0; with pad="variable" the
        batch gains "length" and "mask"."""
        if "clip" not in batch:
            return batch
        lengths = graph.clip_lengths(batch.pop("clip").numpy(), n_clips)
        if not self.variable and np.all(lengths == lengths[0]):  # T frames each: views
            for name in graph.BATCH_FIELDS:
                batch[name] = batch[name].reshape(n_clips, -1, *batch[name].shape[1:])
            return batch
        for name in graph.BATCH_FIELDS:
            batch[name] = _pad_clips(batch[name], lengths)
        batch["length"] = torch.from_numpy(lengths)
        batch["mask"] = torch.from_numpy(graph.padding_mask(lengths))
        return batch

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One clip: JPEGs decoded by torchvision, uint8 (T, 3, H, W), resized and flipped."""
        from torchvision.io import ImageReadMode, decode_jpeg

        frames = self.clip(epoch, index, key)
        images = [decode_jpeg(torch.from_numpy(data), mode=ImageReadMode.RGB)
                  for data in self.source.read(index, ClipRead(frames)).data]
        if self.size is None or self.crop:
            self._clip_resolution(index, frames, [tuple(im.shape[1:]) for im in images])
        return self._torch_sample(epoch, index, key, frames, torch.stack(images))


def _pad_clips(flat: torch.Tensor, lengths: np.ndarray) -> torch.Tensor:
    """(sum(lengths), ...) grouped by clip -> (B, max length, ...), zeros after each clip's
    frames; a view when every clip is full, else one slice copy per clip (no index tensor
    crosses to the device, so nothing waits on the stream)."""
    longest = int(lengths.max())
    if np.all(lengths == longest):
        return flat.reshape(len(lengths), longest, *flat.shape[1:])
    out = flat.new_zeros((len(lengths), longest, *flat.shape[1:]))
    start = 0
    for row, n in enumerate(lengths.tolist()):
        out[row, :n] = flat[start:start + n]
        start += n
    return out
