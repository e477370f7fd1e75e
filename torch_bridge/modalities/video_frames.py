"""`modality="video"` over a frame-folder tree (`python -m dali_pipes.frames extract`).

Same options, batch schema and clip sampling as `VideoModality` ("frames" (B, T, 3, H, W)
float32 normalized, "timestamps" (B, T) float64, "label", "index"); `make_loader` picks this
class when `data` is a frame-folder tree (`is_frame_folder_tree`). DALI backend: the source
reads the clip's T JPEG files, the graph decodes them (nvJPEG with `mixed` on the GPU),
resizes, stacks them into a sequence and flips / normalizes (`dali_pipes.pipelines.
video_frames`). Torch backend: `torchvision.io.decode_jpeg`, antialiased bilinear resize and
the same flip in the workers; normalization in `finish`. With `size=None` the native
resolution is kept: every frame of a batch must share it, or ValueError names the files
(the DALI feeds read each JPEG's frame header; the torch path compares decoded shapes).
With pad="variable" a clip shorter than T fills the graph's T JPEG inputs with its last
frame's bytes and feeds its length, and the graph cuts the sequence back (see
`dali_pipes.pipelines.video_frames`).
"""
from __future__ import annotations

import os

import numpy as np
import torch

from dali_pipes.formats.jpeg import jpeg_size
from dali_pipes.frames import frame_name
from dali_pipes.pipelines import video_frames as graph
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.sources.video_frames import FrameFolderSource
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.base import aug_keys
from torch_bridge.modalities.video import ClipModality


class FrameFolderModality(ClipModality):
    """Options as `VideoModality`: clip_length, stride, size, train, clips_per_video."""

    name = "video"
    dali_outputs, variable_outputs = graph.OUTPUTS, graph.VARIABLE_OUTPUTS
    source_class = FrameFolderSource

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: str, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_frames_pipeline(device=device, batch_size=batch_size,
                                           config=config, size=self.size,
                                           clip_length=self.source.clip_length,
                                           device_id=device_id, variable=self.variable)

    def _read(self, epoch: int, index: int, key: int | None = None) -> dict:
        frames = self.clip(epoch, index, key)
        jpegs = self.source.read_jpegs(index, frames)
        hw = None
        if self.size is None:  # native resolution: one size per clip, from the headers
            hw = self._clip_resolution(index, frames, [
                jpeg_size(data, self._frame_path(index, k)) for k, data in zip(frames, jpegs)])
        return {"jpegs": jpegs, "hw": hw, "timestamps": self.source.timestamps(index, frames)}

    def _frame_path(self, index: int, frame: int) -> str:
        return os.path.join(self.path(index), frame_name(int(frame)))

    def _clip_resolution(self, index: int, frames, sizes: list[tuple[int, int]]):
        """The clip's one (H, W); ValueError naming the frames when they differ."""
        if len(set(sizes)) > 1:
            listed = ", ".join(f"{self._frame_path(index, k)} is {h}x{w}"
                               for k, (h, w) in list(zip(frames, sizes))[:6])
            raise ValueError(f"size=None keeps native resolution, so every frame of a clip "
                             f"must share it: {listed}; pass size=(H, W) to resize")
        return sizes[0]

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, object], np.ndarray]:
        samples, kept_arr, mirror = self._read_clips(epoch, indices, guard, keys)
        if not samples:
            return {}, kept_arr
        out: dict[str, object] = {  # a short clip repeats its last frame's bytes
            name: [s["jpegs"][min(t, len(s["jpegs"]) - 1)] for s in samples]
            for t, name in enumerate(graph.frame_inputs(self.source.clip_length))}
        out["mirror"] = mirror
        out["timestamps"] = [s["timestamps"] for s in samples]
        if self.variable:
            out["length"] = np.array([len(s["jpegs"]) for s in samples], np.int32)
        return out, kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One clip: JPEGs decoded by torchvision, uint8 (T, 3, H, W), resized and flipped."""
        from torchvision.io import ImageReadMode, decode_jpeg
        from torchvision.transforms.v2 import functional as F

        frames = self.clip(epoch, index, key)
        images = [decode_jpeg(torch.from_numpy(data), mode=ImageReadMode.RGB)
                  for data in self.source.read_jpegs(index, frames)]
        if self.size is None:
            self._clip_resolution(index, frames, [tuple(im.shape[1:]) for im in images])
        clip = torch.stack(images)
        if self.size is not None:
            clip = F.resize(clip, list(self.size), antialias=True,
                            interpolation=F.InterpolationMode.BILINEAR)
        if self.flips(epoch, aug_keys(index, key))[0]:
            clip = clip.flip(-1)
        return {"frames": clip.contiguous(),
                "timestamps": torch.from_numpy(self.source.timestamps(index, frames))}

