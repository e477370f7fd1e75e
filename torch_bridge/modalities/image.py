"""The image modality: image class folders or WebDataset shards -> normalized crops, labels."""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.augment import image_params
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.pipelines import image as image_graph
from dali_pipes.pipelines.config import PipelineConfig
from dali_pipes.pipelines.image_scaled import build_scaled_image_pipeline
from dali_pipes.sources.hf import image_source
from dali_pipes.sources.shards import ShardSource, is_shard_data
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities import image_scaled
from torch_bridge.modalities.base import SourceModality, aug_keys, normalize_pixels
from torch_bridge.modalities.image_decode import decode_rgb


class ImageModality(SourceModality):
    """Options: `size` (output side, default 224), `train` (random resized crop + flip,
    default True; False: resize shorter side to size/0.875 and crop the centre) and
    `max_pixels` (JPEGs whose header claims more pixels are bad samples under on_error, on
    both backends, before decoding; default PIL's 89,478,485; None: no limit).
    `image_column` / `label_column` (with `data` a Hugging Face `datasets.Dataset` only;
    default "image" / "label"): see dali_pipes.sources.hf.
    For WebDataset shards (local or URLs): `storage_options` (for fsspec), `cache_dir` and
    `cache_limit` (bytes)."""

    name = "image"
    dali_outputs = image_graph.OUTPUTS

    def __init__(self, data, *, seed: int, size: int = 224, train: bool = True,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS,
                 image_column: str | None = None, label_column: str | None = None,
                 storage_options: dict | None = None, cache_dir: str | None = None,
                 cache_limit: int | None = None):
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int, got {size!r}")
        remote = {"storage_options": storage_options, "cache_dir": cache_dir,
                  "cache_limit": cache_limit}
        if is_shard_data(data):  # WebDataset tar shards, local or remote (sources/shards.py)
            self._set_source(ShardSource(data, remote=remote, max_pixels=max_pixels), data)
            self.multi_source = self.source.multi_source
        elif any(v is not None for v in remote.values()):
            raise ValueError("storage_options, cache_dir and cache_limit apply to shard URLs")
        else:
            self._set_source(image_source(data, max_pixels=max_pixels,
                                          image_column=image_column,
                                          label_column=label_column), data)
        self.seed, self.size, self.train = seed, size, train
        self._scaled = False  # reduced-scale decoding in the feed (set by build_pipeline)
        self._decode_opts: dict | None = None

    # DALI backend -------------------------------------------------------------------
    def build_pipeline(self, *, device: str, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        # Large photos on the CPU backend: decode at a reduced DCT scale in the feed
        # (torch_bridge/modalities/image_scaled.py); else DALI decodes the crop window.
        # The first build decides (the engine's one-sample blame pipeline reuses it).
        if self._decode_opts is None:
            self._scaled = image_scaled.scaled_decode_pays(
                self.source, size=self.size, train=self.train, device=device,
                enabled=config.scaled_jpeg_decode)
            self._decode_opts = dict(fast_idct=config.use_fast_idct, threads=config.threads())
        if self._scaled:
            return build_scaled_image_pipeline(batch_size=batch_size, size=self.size,
                                               config=config)
        return image_graph.build_image_pipeline(device=device, batch_size=batch_size,
                                                size=self.size, config=config,
                                                device_id=device_id)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, list[np.ndarray]], np.ndarray]:
        """Read and check a batch's files; crop parameters for the good ones, vectorised."""
        got, kept = guard.read_batch(epoch, indices, self.path, self.source.read_checked)
        kept_arr = np.asarray(indices, np.int64)[kept]
        if not got:
            return {}, kept_arr
        datas = [data for data, _ in got]
        hw = np.asarray([size for _, size in got], dtype=np.int64)
        windows, flip = image_params(self.seed, epoch, aug_keys(indices, keys)[kept],
                                     hw[:, 0], hw[:, 1], size=self.size, train=self.train)
        windows = windows.astype(np.int32)
        if self._scaled:
            return self._scaled_feeds(epoch, kept_arr, datas, hw, windows, flip, guard)
        # Fixed-size inputs go in as one dense array each: DALI takes the first axis as
        # the batch, which saves converting B small arrays per input.
        return {"jpegs": datas, "anchor": np.ascontiguousarray(windows[:, :2]),
                "shape": np.ascontiguousarray(windows[:, 2:]),
                "mirror": flip.astype(np.int32)}, kept_arr

    def _scaled_feeds(self, epoch, kept_arr, datas, hw, windows, flip, guard):
        """Feeds of the reduced-scale graph; a file libjpeg-turbo rejects follows on_error."""
        paths = [self.path(int(i)) for i in kept_arr]
        decoded, start, end = image_scaled.decode_windows(
            datas, hw, windows, size=self.size, paths=paths, **self._decode_opts)
        ok = []
        for i, got in enumerate(decoded):
            if guard.run(int(kept_arr[i]), paths[i], epoch, lambda got=got: _unwrap(got)) \
                    is not None:
                ok.append(i)
        if not ok:
            return {}, kept_arr[ok]
        return {"pixels": [decoded[i] for i in ok], "roi_start": start[ok],
                "roi_end": end[ok], "mirror": flip[ok].astype(np.int32)}, kept_arr[ok]

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One sample decoded and cropped with torchvision: uint8 (3, size, size)."""
        from torchvision.transforms.v2 import functional as F

        data, (h, w) = self.source.read_checked(index)
        windows, flip = image_params(self.seed, epoch, aug_keys(index, key), np.array([h]),
                                     np.array([w]), size=self.size, train=self.train)
        image = decode_rgb(data)
        top, left, ch, cw = windows[0].tolist()
        image = F.resized_crop(image, top, left, ch, cw, [self.size, self.size],
                               interpolation=F.InterpolationMode.BILINEAR, antialias=True)
        if flip[0]:
            image = image.flip(-1)
        return {"image": image}

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Batch-level work on the target device: uint8 -> normalized float32."""
        batch["image"] = normalize_pixels(batch["image"])
        return batch


def _unwrap(got):
    """A decoded result, or raise the exception that took its place."""
    if isinstance(got, BaseException):
        raise got
    return got
