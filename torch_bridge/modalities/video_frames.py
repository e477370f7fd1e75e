"""`modality="video"` over a frame-folder tree (`python -m dali_pipes.frames extract`).

Same options, batch schema and clip sampling as `VideoModality` ("frames" (B, T, 3, H, W)
float32 normalized, "timestamps" (B, T) float64, "label", "index"); `make_loader` picks this
class when `data` is a frame-folder tree (`is_frame_folder_tree`). DALI backend: the source
reads the clip's T JPEG files, the graph decodes them (nvJPEG with `mixed` on the GPU),
resizes, stacks them into a sequence and flips / normalizes (`dali_pipes.pipelines.
video_frames`). Torch backend: `torchvision.io.decode_jpeg`, antialiased bilinear resize and
the same flip in the workers; normalization in `finish`. With `size=None` every clip of a
batch must share one resolution.
"""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.pipelines import video_frames as graph
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.sources.video_frames import FrameFolderSource
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.video import ClipModality


class FrameFolderModality(ClipModality):
    """Options as `VideoModality`: clip_length, stride, size, train, clips_per_video."""

    name = "video"
    dali_outputs = graph.OUTPUTS
    source_class = FrameFolderSource

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: str, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return graph.build_frames_pipeline(device=device, batch_size=batch_size,
                                           config=config, size=self.size,
                                           clip_length=self.source.clip_length,
                                           device_id=device_id)

    def _read(self, epoch: int, index: int) -> dict:
        frames = self.clip(epoch, index)
        return {"jpegs": self.source.read_jpegs(index, frames),
                "timestamps": self.source.timestamps(index, frames)}

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard
              ) -> tuple[dict[str, object], np.ndarray]:
        samples, kept_arr = guard.read_batch(epoch, indices, self.path,
                                             lambda index: self._read(epoch, index))
        if not samples:
            return {}, kept_arr
        out: dict[str, object] = {
            name: [s["jpegs"][t] for s in samples]
            for t, name in enumerate(graph.frame_inputs(self.source.clip_length))}
        out["mirror"] = self.flips(epoch, kept_arr).astype(np.int32)
        out["timestamps"] = np.stack([s["timestamps"] for s in samples])
        return out, kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        """One clip: JPEGs decoded by torchvision, uint8 (T, 3, H, W), resized and flipped."""
        from torchvision.io import ImageReadMode, decode_jpeg
        from torchvision.transforms.v2 import functional as F

        frames = self.clip(epoch, index)
        clip = torch.stack([decode_jpeg(torch.from_numpy(data), mode=ImageReadMode.RGB)
                            for data in self.source.read_jpegs(index, frames)])
        if self.size is not None:
            clip = F.resize(clip, list(self.size), antialias=True,
                            interpolation=F.InterpolationMode.BILINEAR)
        if self.flips(epoch, np.array([index]))[0]:
            clip = clip.flip(-1)
        return {"frames": clip.contiguous(),
                "timestamps": torch.from_numpy(self.source.timestamps(index, frames))}

