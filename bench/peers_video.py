"""Other loaders' rows for `compare.py --modality video --peers`: the video decoders users
would pick instead of ours, each in a torch DataLoader with 2 workers and our output.

- "torchcodec": `torchcodec.decoders.VideoDecoder` (one per clip, `num_ffmpeg_threads=1` as
  its docs advise for decoders running side by side, `seek_mode="approximate"`, which its
  docs recommend for speed where the file's metadata is right, as in these constant-rate
  files: the exact mode scans the whole file each time a decoder opens it) with its
  decoder-side `torchcodec.transforms.Resize((size, size))` (bilinear, antialiased, in
  FFmpeg's filter graph), the clip's frames by index with `get_frames_at`.
- "pyav": PyAV as its docs show: `av.open`, `container.seek` to the clip's first frame
  (FFmpeg lands on the keyframe at or before it), decode, and each wanted frame scaled and
  converted to RGB by one `VideoReformatter` per clip (swscale scales while it converts;
  `frame.to_ndarray(width=, height=)` would make a new scaler for every frame). The decoder
  keeps PyAV's default threading: "AUTO" (frame threads) costs more CPU per clip where the
  2 workers already fill the cores (docs/measurements.md).

Every row decodes the same frames: the sampler runs our plan in the main process (listing,
clip starts and frame indices from `VideoFolderSource.clip_frames`, i.e. the pure functions
of `dali_pipes.geometry.clips`, and the whole-clip flips of `dali_pipes.geometry.draws.flips`) and
hands each worker (index, frame indices, flip); the videos are probed (and the decoder's
module imported, for the workers to inherit) once when the loader is made, before any
timing. With a GPU, workers return uint8 (T, 3, size, size) clips and the batch is
normalized on the device as ours is; on the CPU each worker normalizes its clip (one
thread, in place after the float copy, as transforms in a Dataset run), where the main
process would run the same arithmetic on torch's thread pool beside the busy workers.
Dict batches with "frames" float32
(B, T, 3, size, size), "timestamps" float64 (B, T) (seconds as each decoder reports them),
"label" and "index" (`dali_pipes.schema.VIDEO`). Only squashed `size` clips with
"repeat_last" padding: `clip_length`, `stride` and `train` are the options peers share with
ours; options that change only how ours runs (`scaled_decode`, `decode_threads`) are left to
ours, any other is refused. A peer that is not installed is skipped with one line.
"""
from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import torch
from av.video.reformatter import VideoReformatter

from bench.baselines import _DictBatches
from bench.peers import not_installed

VIDEO_PEERS = ("torchcodec", "pyav")
_MODULES = {"torchcodec": "torchcodec.decoders", "pyav": "av"}
SHARED_OPTIONS = ("clip_length", "stride", "train")  # the clip sampling peers share
OURS_ONLY = ("scaled_decode", "decode_threads")  # how ours decodes; peers have their own


def unavailable(peer: str) -> str | None:
    """None when `peer` can run here, else one line saying why not."""
    if peer not in _MODULES:
        return f"unknown video peer {peer!r}; expected one of {', '.join(VIDEO_PEERS)}"
    why = not_installed(peer, _MODULES[peer])
    if why is None and peer == "torchcodec":
        why = _torchcodec_ffmpeg()
    return why


def _torchcodec_ffmpeg() -> str | None:
    """None when torchcodec's video decoder loads FFmpeg's libraries (at its first use,
    not at import), else one line saying it does not."""
    from torchcodec.decoders import VideoDecoder
    try:
        VideoDecoder(b"not a video")
    except Exception as exc:  # no FFmpeg: the load fails; with it: the bytes are refused
        text = str(exc)
        if "libtorchcodec" in text or isinstance(exc, OSError):
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            return f"torchcodec not usable (FFmpeg's libraries do not load: {first[:100]})"
    return None


def decode_torchcodec(path: str, frames: np.ndarray, size: tuple[int, int]
                      ) -> tuple[torch.Tensor, np.ndarray]:
    """uint8 (T, 3, H, W) frames `frames` (presentation indices) of `path` at `size`, and
    their timestamps (seconds), by torchcodec scaling in the decoder."""
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import Resize
    decoder = VideoDecoder(path, num_ffmpeg_threads=1, seek_mode="approximate",
                           transforms=[Resize(size)])
    batch = decoder.get_frames_at(frames.tolist())
    return batch.data, batch.pts_seconds.numpy().astype(np.float64)


def decode_pyav(path: str, frames: np.ndarray, size: tuple[int, int]
                ) -> tuple[torch.Tensor, np.ndarray]:
    """The same by PyAV: seek to the first wanted frame, decode in presentation order up to
    the last one, each wanted frame scaled by one swscale context for the clip. Frame i is
    the one whose pts is i frame periods after the stream's start (constant frame rate)."""
    import av
    wanted = {int(i) for i in frames}
    got: dict[int, tuple[np.ndarray, float]] = {}
    scaler = VideoReformatter()
    with av.open(path) as container:
        stream = container.streams.video[0]
        rate, base = Fraction(stream.average_rate), Fraction(stream.time_base)
        start = stream.start_time or 0
        container.seek(start + round(Fraction(min(wanted)) / rate / base), stream=stream,
                       backward=True)
        for frame in container.decode(stream):
            i = round((frame.pts - start) * base * rate)
            if i in wanted:
                rgb = scaler.reformat(frame, width=size[1], height=size[0], format="rgb24")
                got[i] = (rgb.to_ndarray(), float(frame.time))
            if i >= max(wanted):
                break
    missing = sorted(wanted - set(got))
    if missing:
        raise ValueError(f"{path}: PyAV gave no frames {missing[:8]} (of {len(wanted)} wanted)")
    clip = np.stack([got[int(i)][0] for i in frames])
    return (torch.from_numpy(clip).permute(0, 3, 1, 2),
            np.array([got[int(i)][1] for i in frames], np.float64))


_DECODERS = {"torchcodec": decode_torchcodec, "pyav": decode_pyav}


class _Clips(torch.utils.data.Dataset):
    """One clip per (index, frame indices, flip) from the sampler, decoded by `decode`;
    normalized here when `normalize` (the values of `normalize_pixels`)."""

    def __init__(self, files: list[str], labels: np.ndarray, decode, size: tuple[int, int],
                 normalize: bool = False):
        self.files, self.labels, self.decode, self.size = files, labels, decode, size
        self.normalize = normalize

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, item) -> dict:
        index, frames, flip = item
        clip, timestamps = self.decode(self.files[index], frames, self.size)
        if flip:
            clip = clip.flip(-1)
        if self.normalize:
            from torch_bridge.modalities.base import PIXEL_MEAN, PIXEL_STD
            clip = clip.float().sub_(PIXEL_MEAN).div_(PIXEL_STD)
        return {"frames": clip.contiguous(), "timestamps": torch.from_numpy(timestamps),
                "label": int(self.labels[index]), "index": index}


class _PlanSampler(torch.utils.data.Sampler):
    """Each epoch, every sample once in a seeded random order, with our plan's clip frames
    and flip for (seed, epoch, index): what every row decodes."""

    def __init__(self, source, seed: int, train: bool):
        self.source, self.seed, self.train, self.epoch = source, seed, train, 0

    def __len__(self) -> int:
        return len(self.source)

    def __iter__(self):
        from dali_pipes.geometry.draws import flips
        epoch, self.epoch = self.epoch, self.epoch + 1
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.source))
        mirror = flips(self.seed, epoch, order) if self.train else np.zeros(len(order), bool)
        for index, flip in zip(order.tolist(), mirror.tolist(), strict=True):
            frames = self.source.clip_frames(self.seed, epoch, index, train=self.train)
            yield index, frames, bool(flip)


def _check_options(options: dict) -> dict:
    other = sorted(set(options) - set(SHARED_OPTIONS) - set(OURS_ONLY))
    if other:
        raise ValueError(f"video peers take only {', '.join(SHARED_OPTIONS)} (and leave "
                         f"{', '.join(OURS_ONLY)} to ours), not {', '.join(other)}")
    return {k: options[k] for k in SHARED_OPTIONS if k in options}


def video_peer_loader(peer: str, root, *, batch_size: int, size: int = 224,
                      num_workers: int = 2, device: str = "cpu", seed: int = 0,
                      options: dict | None = None):
    """The loader of `peer` (one of VIDEO_PEERS) over `root`'s class folders of videos:
    dict batches as the module docstring says. `options`: make_loader options of the run
    (`clip_length` default 8, `stride` 1, `train` True, as ours)."""
    from dali_pipes.sources.video import VideoFolderSource
    from torch_bridge.modalities.base import normalize_pixels
    decode = _DECODERS.get(peer)
    if decode is None:
        raise ValueError(f"unknown video peer {peer!r}; expected one of "
                         f"{', '.join(VIDEO_PEERS)}")
    shared = _check_options(options or {})
    # imported here, before the workers fork, so that they inherit it: torchcodec's import
    # (torch._dynamo) costs seconds of CPU that each worker would otherwise pay again
    importlib.import_module(_MODULES[peer])
    source = VideoFolderSource(root, clip_length=shared.get("clip_length", 8),
                               stride=shared.get("stride", 1))
    for i in range(len(source)):
        source.frame_count(i)  # probed here, before timing (FormatError for a bad file)
    files = [str(source.path(i)) for i in range(len(source))]
    dev = torch.device(device)
    ds = _Clips(files, source.labels, decode, (size, size), normalize=dev.type == "cpu")
    dl = torch.utils.data.DataLoader(
        ds, batch_size=batch_size, num_workers=num_workers, persistent_workers=num_workers > 0,
        sampler=_PlanSampler(source, seed, bool(shared.get("train", True))))

    def finish(batch: dict) -> dict:
        if batch["frames"].dtype == torch.uint8:
            batch["frames"] = normalize_pixels(batch["frames"].to(dev))
        return {k: v.to(dev) for k, v in batch.items()}
    return _DictBatches(dl, finish, len(dl))
