"""The video modality: class folders of video files -> normalized clips, timestamps, labels.

DALI backend: per sample the feeding process reads an encoded segment (`remux_segment`, no
decoding) when the graph's decoder takes the codec on the chosen device, or decodes the clip
with PyAV (the fallback: H.264/HEVC/AV1/MPEG-4 on the CPU backend); the graph decodes, resizes,
flips and normalizes (see `dali_pipes.pipelines.video`). Torch backend: DataLoader workers
decode with `decode_frames_pyav`, the frames leaving the decoder scaled to the output (or the
crop window) with `scaled_decode` (default), else resized with torchvision (bilinear,
antialias); the consumer normalizes. Clip starts and flips come from the plan functions on
both backends, so the two see the same frames; pixel values differ slightly (DALI's and
swscale's YUV->RGB and the two resizers differ: mean absolute difference about 2 levels).

`pad="variable"`: a clip keeps only the frames its video has (still `stride` apart), and the
batch is padded to its longest clip: by `fn.pad` in the graph on the DALI backend, by
`torch_bridge.engines._collate.pad_batch` on the torch backend. Padded positions are 0 in "frames"
(after normalization), "timestamps" and "imu", False in "imu_valid"; the batch gains
"length" int64 (B,) and "mask" bool (B, T).

`resize="short_side"` keeps the aspect ratio: frames are resized to `short_side` on their
shorter side and a `size` window is cut out, random per clip in training, centred in
evaluation, or one of `views=(clips, crops)` evenly spaced windows
(`dali_pipes.geometry.clip_crops`; docs/video_crops.md). On the DALI backend the graph
resizes only the window from the frames it decodes (`fn.resize` with a region of interest);
PyAV-decoded clips are resized and cut in the feed with the torch path's call
(`clip_resize.resize_crop`).

Throughput against the torch reference: docs/measurements.md.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import numpy as np
import torch

from dali_pipes.clip_options import ClipOptions, VideoDecodeOptions
from dali_pipes.formats.video import decoder_threads
from dali_pipes.geometry.clip_crops import check_crop_options, clip_windows
from dali_pipes.geometry.clips import check_loader_pad
from dali_pipes.geometry.draws import flips
from dali_pipes.gpu.nvdec import StreamFormat, generation, route
from dali_pipes.pipelines import video as graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig
from dali_pipes.sources.protocol import ClipRead, DecodedClipRead
from dali_pipes.sources.video import VideoFolderSource
from dali_pipes.sources.video_data import video_source
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store
from torch_bridge import registry
from torch_bridge.engines._autoworkers import rank_cores
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.base import SourceModality, aug_keys, normalize_pixels
from torch_bridge.modalities.clip_resize import (
    crop_feeds,
    decode_scaled,
    resize_clip,
    resize_crop,
    roi_feeds,
)
from torch_bridge.options import split_options

_DUMMY_FRAMES = np.zeros((1, 1, 1, 3), np.uint8)
_DUMMY_BYTES = np.zeros(1, np.uint8)


def _decoder_context(dev: torch.device) -> tuple[str | None, dict | None]:
    """(GPU family, device probe results) of a CUDA device, (None, None) for the CPU; the
    probe (`dali_pipes.gpu.nvdec_probe`, cached per process) needs CUDA."""
    if dev.type != "cuda":
        return None, None
    from dali_pipes.gpu.nvdec_probe import probe_codecs
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return generation(torch.cuda.get_device_capability(index)), probe_codecs(index)


def _check_size(size) -> tuple[int, int] | None:
    if size is None:
        return None
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size > 0:
        return int(size), int(size)
    if (isinstance(size, (tuple, list)) and len(size) == 2
            and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s > 0
                    for s in size)):
        return int(size[0]), int(size[1])
    raise ValueError(f"size must be a positive int, a (height, width) pair or None, "
                     f"got {size!r}")


class ClipModality(SourceModality):
    """Options of every clip modality: `clip_length` (T, default 8), `stride` (default 1),
    `size` (int, (H, W), or None for native resolution; default 224), `train` (default True:
    random clip start and one horizontal flip for the whole clip; False: centred clips, no
    flip), `clips_per_video` (default 1) and `pad` ("repeat_last", default: a clip past the
    end of its video repeats the last frame; "variable": it stops there and the batch is
    padded, with "length" and "mask").
    `resize`: "squash" (default: every frame resized to `size`, aspect ratio not kept) or
    "short_side" (aspect kept: shorter side resized to `short_side`, then a `size` window
    cut out, one for the whole clip: random in training, centred in evaluation).
    `short_side`: with resize="short_side", an int >= max(size) (default None:
    int(max(size) / 0.875), 256 for 224).
    `views`: None, or (clips, crops) for multi-view evaluation (needs train=False and
    clips_per_video=1; crops > 1 needs resize="short_side"): each video gives
    clips * crops samples, `clips` uniformly spaced clip starts times `crops` windows
    evenly spaced along the frame's long side, and batches gain "video" (the video's
    position in the listing) and "view" (clip * crops + crop) to average predictions per
    video (docs/video_crops.md). Subclasses name their `source_class` and the graph
    outputs of both pad modes (`dali_outputs`, `variable_outputs`)."""

    name: str  # the registry name, set by each subclass
    source_class: type = type(None)
    dali_outputs: tuple[str, ...] = ()
    variable_outputs: tuple[str, ...] = ()

    option_groups: tuple[type, ...] = (ClipOptions,)

    def __init__(self, data, *, seed: int, store: Store | None = None, **options: Any):
        given = split_options(options, (ClipOptions,), where=f"make_loader({self.name!r})")
        o = ClipOptions(**given[ClipOptions])
        if not isinstance(o.train, (bool, np.bool_)):
            raise ValueError(f"train must be True or False, got {o.train!r}")
        self.size = _check_size(o.size)
        # short_side None: resize="squash"; views as (clips, crops) or None
        self.short_side, clips, crops = check_crop_options(
            resize=o.resize, short_side=o.short_side, views=o.views, size=self.size,
            train=bool(o.train), clips_per_video=o.clips_per_video)
        self.views = None if o.views is None else (clips, crops)
        self.variable = check_loader_pad(o.pad) == "variable"
        if self.variable:
            self.dali_outputs = self.variable_outputs
        # fields the torch collate pads along time (none unless pad="variable")
        self.padded_fields = (registry.get(self.name).batch_schema.time_fields()
                              if self.variable else ())
        self._set_source(self._make_source(data, store=store, clip_length=o.clip_length,
                                           stride=o.stride, clips_per_video=clips,
                                           crops=crops), data)
        self.seed, self.train = seed, bool(o.train)

    @property
    def crop(self) -> bool:
        """Whether clips are cut from short-side resized frames (resize="short_side")."""
        return self.short_side is not None

    def _make_source(self, data, *, store: Store | None, **clip_options):
        return self.source_class(data, store=store, **clip_options)

    def _read(self, epoch: int, index: int, key: int | None = None) -> dict:
        """One sample's feeds (the subclass reads its clip: a video file or a frame folder)."""
        raise NotImplementedError(f"{type(self).__name__} must define _read")

    def _torch_sample(self, epoch: int, index: int, key: int | None, frames: np.ndarray,
                      clip: torch.Tensor) -> dict[str, torch.Tensor]:
        """The torch path's sample from a decoded uint8 (T, 3, H, W) clip: resized to `size`
        (antialiased bilinear, as DALI) or resized and cut to the plan's window, mirrored
        when its flip says so, with its timestamps."""
        window = self.window(epoch, index, key, (clip.shape[-2], clip.shape[-1]))
        clip = resize_crop(clip, self.size, window)
        if self.flips(epoch, aug_keys(index, key))[0]:
            clip = clip.flip(-1)
        return {"frames": clip.contiguous(),
                "timestamps": torch.from_numpy(self.source.timestamps(index, frames))}

    def clip(self, epoch: int, index: int, key: int | None = None) -> np.ndarray:
        """(T,) int64 frame indices of sample `index`'s clip in `epoch` (with pad="variable"
        only the frames the video has); `key`: the plan's augmentation key of this draw."""
        return self.source.clip_frames(self.seed, epoch, index, train=self.train,
                                       variable=self.variable, key=key)

    def window(self, epoch: int, index: int, key: int | None, hw: tuple[int, int]
               ) -> np.ndarray | None:
        """Sample `index`'s crop window (resized height, resized width, top, left) for
        frames of `hw` (height, width), from the plan; None with resize="squash"."""
        if self.short_side is None or self.size is None:
            return None
        _, _, crop = self.source.views([index])
        return clip_windows(self.seed, epoch, aug_keys(index, key), [hw[0]], [hw[1]],
                            size=self.size, short_side=self.short_side, train=self.train,
                            crop_id=crop, crops=self.source.crops)[0]

    def _extra_meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """With views: "video" and "view" (`schema.VIEWS`)."""
        if self.views is None:
            return {}
        video, view, _ = self.source.views(indices)
        return {"video": video, "view": view}

    def flips(self, epoch: int, keys: np.ndarray) -> np.ndarray:
        """Whether each clip is mirrored, from its augmentation keys (or indices)."""
        if not self.train:
            return np.zeros(len(keys), dtype=bool)
        return flips(self.seed, epoch, np.asarray(keys, np.int64))

    def _read_clips(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
                    ) -> tuple[list[dict], np.ndarray, np.ndarray]:
        """A batch's clips read with the subclass's `_read` (bad files go to the guard): the
        samples, the int64 indices kept and their int32 mirror flags; with size=None the
        kept clips must share one resolution."""
        samples, kept = guard.read_batch(
            epoch, indices, self.path, lambda index, key=None: self._read(epoch, index, key),
            keys=keys)
        kept_arr = np.asarray(indices, np.int64)[kept]
        if samples:
            self._check_resolutions(kept_arr.tolist(), [s["hw"] for s in samples])
        mirror = self.flips(epoch, aug_keys(indices, keys)[kept]).astype(np.int32)
        return samples, kept_arr, mirror

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Batch-level work on the target device: uint8 -> normalized float32 (padded frames
        stay exactly 0, as the DALI graph pads after normalizing)."""
        batch["frames"] = normalize_pixels(batch["frames"])
        if "mask" in batch:
            batch["frames"].masked_fill_(~batch["mask"][:, :, None, None, None], 0.0)
        return batch

    def _check_resolutions(self, indices: list[int], sizes: list[tuple[int, int]]) -> None:
        """With size=None every clip of a batch must share one resolution (ValueError
        naming the files otherwise)."""
        if self.size is not None or len(set(sizes)) <= 1:
            return
        first = sizes[0]
        odd = [(i, hw) for i, hw in zip(indices, sizes, strict=True) if hw != first]
        raise ValueError(
            f"size=None keeps native resolution, so every clip of a batch must share it: "
            f"{self.path(indices[0])} is {first[0]}x{first[1]} but "
            + ", ".join(f"{self.path(i)} is {hw[0]}x{hw[1]}" for i, hw in odd[:4])
            + "; pass size=(H, W) to resize")


class VideoModality(ClipModality):
    """Video files in class folders (see ClipModality for the options; `resize`,
    `short_side` and `views`, aspect-keeping crops and multi-view evaluation:
    docs/video_crops.md), local, behind URLs (`s3://bucket/train/`) or in a store handed
    in, or WebDataset shards of video members (docs/data_sources.md). `device` ("cpu",
    "cuda", "cuda:N"; fixed here, never changed by build_pipeline) chooses the DALI graph's
    device and, on a GPU, the decoder of each file (`dali_pipes.gpu.nvdec.route`: NVDEC where
    the GPU family's tables and the one-time device probe allow it, else the PyAV fallback).
    `scaled_decode` (default True): clips decoded with PyAV (the torch path, and the
    fallback of the DALI backend) leave the decoder already scaled to `size` (or to the crop
    window's resized shape, then cut) by swscale, instead of full-size RGB resized by
    torchvision (False: that exact path): same frames and timestamps, pixels within 1.2-1.4
    grey levels on average (p99 3-4) of the exact path, up to 1.5x less CPU per 720p clip
    (docs/measurements.md). `decode_threads`: FFmpeg threads of each PyAV decoder
    (0, default: this rank's cores shared by the processes decoding, `decoder_threads`)."""

    name = "video"
    dali_outputs, variable_outputs = graph.OUTPUTS, graph.VARIABLE_OUTPUTS
    source_class = VideoFolderSource

    def _make_source(self, data, *, store: Store | None, **clip_options):
        return video_source(data, store=store or open_store(data), **clip_options)

    option_groups: tuple[type, ...] = (ClipOptions, VideoDecodeOptions)

    def __init__(self, data, *, seed: int, device: str = "cpu", store: Store | None = None,
                 **options: Any):
        given = split_options(options, (VideoDecodeOptions,), rest=True,
                              where=f"make_loader({self.name!r})")
        decode = VideoDecodeOptions(**given[VideoDecodeOptions])
        threads = decode.decode_threads
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) \
                or threads < 0:
            raise ValueError(f"decode_threads must be an int >= 0, got {threads!r}")
        self.scaled_decode, self.decode_threads = bool(decode.scaled_decode), int(threads)
        super().__init__(data, seed=seed, store=store, **given[None])
        self.multi_source = getattr(self.source, "multi_source", self.multi_source)
        self.device = torch.device(device)
        self.dali_device: Literal["cpu", "gpu"] = "gpu" if self.device.type == "cuda" else "cpu"
        self._nvdec: tuple | None = None  # (GPU family, probe results), on first use
        # clips read in this process per decoder that took them: "nvdec" / "dali_cpu" (the
        # graph's decoder) or "pyav" (the fallback); feed workers keep their own
        self.decodes: Counter[str] = Counter()

    # DALI backend -------------------------------------------------------------------
    def _check_device(self, device: str) -> None:
        if device != self.dali_device:
            raise ValueError(f"this {self.name} modality was made for DALI device "
                             f"{self.dali_device!r} (its decoder routing depends on it), "
                             f"not {device!r}; make a new one for another device")

    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        self._check_device(device)
        self._routing()  # probe NVDEC here, in the main process, before feed workers start
        return graph.build_video_pipeline(device=device, batch_size=batch_size,
                                          config=config, size=self.size, device_id=device_id,
                                          variable=self.variable, crop=self.crop)

    def decoder(self, index: int) -> tuple[str, str]:
        """("nvdec" | "dali_cpu" | "pyav", why) for sample `index`'s file."""
        info = self.source.info(index)
        fmt = StreamFormat(codec=info.codec,
                           width=info.width, height=info.height, profile=info.profile,
                           chroma=info.chroma, bit_depth=info.bit_depth)
        family, probed = self._routing()
        return route(fmt, device=self.dali_device, family=family, probed=probed)

    def _routing(self) -> tuple[str | None, dict | None]:
        if self._nvdec is None:
            self._nvdec = _decoder_context(self.device)
        return self._nvdec

    def _read(self, epoch: int, index: int, key: int | None = None) -> dict:
        """One sample's graph inputs (probing, remuxing or decoding may raise)."""
        frames = self.clip(epoch, index, key)
        info = self.source.info(index)
        hw = (info.height, info.width)
        sample = {"frames": frames, "hw": hw,
                  "timestamps": self.source.timestamps(index, frames)}
        window = self.window(epoch, index, key, hw)
        if window is not None:
            sample.update(roi_feeds(window, hw, self.size))
        # The graph's decoder is NVDEC on a GPU and DALI's CPU decoder on the CPU; what it
        # cannot take (a GPU's "dali_cpu" route included) is decoded here with PyAV.
        chosen = self.decoder(index)[0]
        if chosen == ("nvdec" if self.dali_device == "gpu" else "dali_cpu"):
            self.decodes[chosen] += 1
            sample["video"], sample["start"] = self.source.read(index, ClipRead(frames))
        else:
            self.decodes["pyav"] += 1
            # resized (and cut) here as on the torch path; the graph resizes DALI's clips only
            sample["decoded"] = self._pyav_clip(index, frames, window)
        return sample

    def _threads(self) -> int:
        """The PyAV decoder's threads in this process: `decode_threads`, or (0) this rank's
        cores shared by the DataLoader workers decoding (1 in a feed worker: "auto" starts
        one per core)."""
        from torch_bridge.engines._feeders import in_feed_worker
        if self.decode_threads:
            return self.decode_threads
        if in_feed_worker():
            return 1
        info = torch.utils.data.get_worker_info()
        return decoder_threads(rank_cores(), 1 if info is None else info.num_workers)

    def _pyav_clip(self, index: int, frames: np.ndarray, window) -> np.ndarray:
        """Sample `index`'s clip decoded with PyAV, (T, H, W, 3) uint8 resized (and cut) to
        `size`: scaled in the decoder (`scaled_decode`), else full size through torchvision."""
        def decode(scale=None):
            return self.source.read(index, DecodedClipRead(frames, scale=scale,
                                                           threads=self._threads()))
        if self.scaled_decode:
            return decode_scaled(decode, self.size, window)
        return resize_clip(decode(), self.size, window)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None
              ) -> tuple[dict[str, Any], np.ndarray]:
        """Read a batch's clips (bad files go to the guard) and their parameters."""
        samples, kept_arr, mirror = self._read_clips(epoch, indices, guard, keys)
        if not samples:
            return {}, kept_arr
        n, src = len(kept_arr), self.source
        return {**crop_feeds(samples, self.crop),
                "video": [s.get("video", _DUMMY_BYTES) for s in samples],
                "decoded": [s.get("decoded", _DUMMY_FRAMES) for s in samples],
                "use_dali": np.array(["video" in s for s in samples]),
                "start_frame": np.array([s.get("start", 0) for s in samples], np.int32),
                "sequence_length": np.array([len(s["frames"]) for s in samples], np.int32),
                "stride": np.full(n, src.stride, np.int32),
                "mirror": mirror,
                "timestamps": [s["timestamps"] for s in samples]}, kept_arr

    # torch reference backend ----------------------------------------------------------
    def load(self, epoch: int, index: int, key: int | None = None
             ) -> dict[str, torch.Tensor]:
        """One clip decoded with PyAV: uint8 (T, 3, H, W), flipped and resized like DALI."""
        frames = self.clip(epoch, index, key)
        if not self.scaled_decode:
            clip = self.source.read(index, DecodedClipRead(frames, threads=self._threads()))
            return self._torch_sample(epoch, index, key, frames,
                                      torch.from_numpy(clip).permute(0, 3, 1, 2))
        info = self.source.info(index)
        window = self.window(epoch, index, key, (info.height, info.width))
        clip = torch.from_numpy(self._pyav_clip(index, frames, window)).permute(0, 3, 1, 2)
        if self.flips(epoch, aug_keys(index, key))[0]:
            clip = clip.flip(-1)
        return {"frames": clip.contiguous(),
                "timestamps": torch.from_numpy(self.source.timestamps(index, frames))}
