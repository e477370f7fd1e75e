"""Other loaders' rows for `compare.py --peers`, each set up as its own docs recommend, with
our output: RandomResizedCrop 224 + horizontal flip, normalized float32 CHW, 2 workers.

- "ffcv": FFCV's ImageNet recipe: the folder written once to a .beton (`DatasetWriter`,
  `RGBImageField`, cached next to the data's cache), read by `ffcv.loader.Loader` with
  `RandomResizedCropRGBImageDecoder`, `RandomHorizontalFlip`, `NormalizeImage` (float32),
  `ToTensor`, `ToTorchImage` (normalising before the tensor steps, as FFCV can on the
  CPU), `order=RANDOM`, `os_cache=True`.
- "spdl": SPDL's pipeline (`spdl.pipeline.PipelineBuilder`): `spdl.io.load_image` (FFmpeg
  decode to RGB) on 2 threads, torchvision v2 crop / flip / normalize, batches aggregated.
- "torchcodec": `torchcodec.decoders.decode_jpeg` in a DataLoader with 2 workers, then
  torchvision v2 (torchcodec decodes, torchvision augments: its documented split).
- "pyav": PyAV (`av.open`, first frame `to_ndarray("rgb24")`) in a DataLoader, v2 after.
- "decode-ceiling": the same images decoded whole by libjpeg-turbo (simplejpeg, fast
  IDCT; PIL when simplejpeg is missing) in a DataLoader with 2 workers, no augmentation,
  the pixels left in the worker: the CPU any full-decode loader needs at least.
None of these is a dependency of the project: a peer that is not installed is skipped with
one line (`unavailable`).

FFCV allocates its batch buffers anew each epoch, which an ImageNet epoch hides and a sample
set's few batches do not: `python bench/peers.py --sample real --copies 8` prints a folder
in which each file appears 8 times (hard links, `repeated_folder`), for --data, so that
every row's warm-up and timed steps fall inside one epoch (docs/measurements.md).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import sys
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.baselines import _DictBatches
from dali_pipes.pipelines.image import IMAGENET_MEAN, IMAGENET_STD
from dali_pipes.sample_data.sample_images import cache_root

PEERS = ("ffcv", "spdl", "torchcodec", "pyav", "decode-ceiling")
_MODULES = {"ffcv": "ffcv.loader", "spdl": "spdl.io", "torchcodec": "torchcodec.decoders",
            "pyav": "av", "decode-ceiling": "PIL.Image"}


def not_installed(peer: str, module: str) -> str | None:
    """None when `module` imports, else one line saying `peer` is not installed."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # ImportError, or a native library that does not load
        return f"{peer} not installed ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def unavailable(peer: str) -> str | None:
    """None when `peer` can run here, else one line saying why not."""
    if peer not in _MODULES:
        return f"unknown peer {peer!r}; expected one of {', '.join(PEERS)}"
    why = not_installed(peer, _MODULES[peer])
    if why is not None:
        return why
    if peer == "spdl":  # the wheel loads FFmpeg's shared libraries on first use
        try:
            import spdl.io
            spdl.io.load_image(_probe_jpeg())
        except Exception as exc:
            return f"spdl not usable ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def _probe_jpeg() -> bytes:
    import io

    from PIL import Image
    out = io.BytesIO()
    Image.new("RGB", (16, 16)).save(out, "JPEG")
    return out.getvalue()


def _augment(size: int):
    """Our output from a decoded image (HWC uint8 tensor): v2 crop, flip, float, normalize."""
    from torchvision.transforms import v2
    return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                       v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def _samples(root) -> tuple[list[str], list[int]]:
    from torchvision.datasets.folder import find_classes, make_dataset
    _, index = find_classes(str(root))
    pairs = make_dataset(str(root), index, extensions=(".jpg", ".jpeg", ".JPEG"))
    return [p for p, _ in pairs], [c for _, c in pairs]


class _Decoded(torch.utils.data.Dataset):
    """(CHW uint8 image tensor or whole decoded array, label) per file, by `decode`."""

    def __init__(self, root, decode, transform=None):
        self.files, self.labels = _samples(root)
        self.decode, self.transform = decode, transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        image = self.decode(self.files[i])
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[i]


def _decode_torchcodec(path: str) -> torch.Tensor:
    from torchcodec.decoders import decode_jpeg
    with open(path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    return decode_jpeg(data)  # CHW uint8 RGB


def _decode_pyav(path: str) -> torch.Tensor:
    import av
    with av.open(path) as container:
        frame = next(container.decode(video=0))
        return torch.from_numpy(frame.to_ndarray(format="rgb24")).permute(2, 0, 1)


def _decode_ceiling(path: str) -> np.ndarray:
    with open(path, "rb") as f:
        data = f.read()
    try:
        import simplejpeg
    except ImportError:
        import io

        from PIL import Image
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True)


def _shape(image: np.ndarray) -> tuple[int, ...]:
    """The ceiling keeps the decoded pixels in the worker: sending whole images to the
    main process would add pickling that no loader with an output of 224x224 pays."""
    return image.shape


def _collate_labels(batch):
    return [image for image, _ in batch], torch.tensor([label for _, label in batch])


def _dataloader(ds, *, batch_size: int, num_workers: int, seed: int, collate=None):
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, shuffle=True, num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed), collate_fn=collate,
        persistent_workers=num_workers > 0)


def peer_loader(peer: str, root, *, batch_size: int, size: int = 224, num_workers: int = 2,
                device: str = "cpu", seed: int = 0):
    """The loader of `peer` (one of PEERS) over `root`'s class folders of JPEGs: dict
    batches with "image" (float32 NCHW; for the ceiling the decoded shapes) and "label"."""
    dev = torch.device(device)
    if peer == "ffcv":
        return _ffcv_loader(root, batch_size, size, num_workers, dev, seed)
    if peer == "spdl":
        return _spdl_loader(root, batch_size, size, num_workers, dev, seed)
    if peer == "decode-ceiling":
        dl = _dataloader(_Decoded(root, _decode_ceiling, _shape), batch_size=batch_size,
                         num_workers=num_workers, seed=seed, collate=_collate_labels)
        return _DictBatches(dl, lambda b: {"image": b[0], "label": b[1]}, len(dl))
    decode = {"torchcodec": _decode_torchcodec, "pyav": _decode_pyav}.get(peer)
    if decode is None:
        raise ValueError(f"unknown peer {peer!r}; expected one of {', '.join(PEERS)}")
    dl = _dataloader(_Decoded(root, decode, _augment(size)), batch_size=batch_size,
                     num_workers=num_workers, seed=seed)
    return _DictBatches(dl, lambda b: {"image": b[0].to(dev), "label": b[1].to(dev)}, len(dl))


def _spdl_loader(root, batch_size: int, size: int, threads: int, dev: torch.device,
                 seed: int):
    import spdl.io
    from spdl.pipeline import PipelineBuilder
    files, labels = _samples(root)
    augment = _augment(size)

    def load(i: int):
        image = torch.from_numpy(spdl.io.to_numpy(spdl.io.load_image(files[i])))
        return augment(image.permute(2, 0, 1)), labels[i]

    def collate(items):
        return {"image": torch.stack([x for x, _ in items]).to(dev),
                "label": torch.tensor([y for _, y in items]).to(dev)}

    class Epochs:
        """A new SPDL pipeline per epoch over a new permutation (its docs' pattern)."""

        def __init__(self):
            self.rng = np.random.default_rng(seed)

        def __len__(self) -> int:
            return (len(files) + batch_size - 1) // batch_size

        def __iter__(self):
            order = self.rng.permutation(len(files)).tolist()
            pipeline = (PipelineBuilder().add_source(order).pipe(load, concurrency=threads)
                        .aggregate(batch_size).pipe(collate).add_sink(3)
                        .build(num_threads=threads))
            with pipeline.auto_stop():
                yield from pipeline.get_iterator(timeout=600)

    return Epochs()


def _ffcv_loader(root, batch_size: int, size: int, num_workers: int, dev: torch.device,
                 seed: int):
    """FFCV's ImageNet training loader over a .beton written once from `root`."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import (
        NormalizeImage,
        RandomHorizontalFlip,
        Squeeze,
        ToTensor,
        ToTorchImage,
    )
    from ffcv.writer import DatasetWriter

    # the folder and its files' names, sizes and times: a changed folder gets a new .beton
    files = sorted(p for p in Path(root).resolve().rglob("*") if p.is_file())
    listing = [(str(p), st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()]]
    key = hashlib.sha256(repr((str(Path(root).resolve()), listing)).encode()).hexdigest()[:16]
    beton = cache_root() / f"ffcv-{key}.beton"
    if not beton.exists():
        from torchvision.datasets import ImageFolder
        beton.parent.mkdir(parents=True, exist_ok=True)
        writer = DatasetWriter(str(beton), {"image": RGBImageField(write_mode="jpg"),
                                            "label": IntField()}, num_workers=num_workers)
        writer.from_indexed_dataset(ImageFolder(str(root)))
    mean, std = np.array(IMAGENET_MEAN) * 255, np.array(IMAGENET_STD) * 255
    # NormalizeImage before ToTensor: on the CPU it is a compiled (numba) stage, and FFCV
    # 1.0.2 never finishes planning a compiled stage that follows torch ones (its ImageNet
    # example normalizes on the GPU, where the stage is torch's)
    pipelines = {"image": [RandomResizedCropRGBImageDecoder((size, size)),
                           RandomHorizontalFlip(), NormalizeImage(mean, std, np.float32),
                           ToTensor(), ToTorchImage()],
                 "label": [IntDecoder(), ToTensor(), Squeeze()]}
    loader = Loader(str(beton), batch_size=batch_size, num_workers=num_workers,
                    order=OrderOption.RANDOM, os_cache=True, drop_last=False,
                    pipelines=pipelines, seed=seed)
    return _DictBatches(loader, lambda b: {"image": b[0].to(dev), "label": b[1].to(dev)},
                        len(loader))


def repeated_folder(root, copies: int, into: Path | None = None) -> Path:
    """A folder of `root`'s class folders in which each file appears `copies` times, as hard
    links named `<stem>-<k><suffix>` (k = 0 .. copies-1), made once under `into` (default:
    beside the sample sets) and reused while `root`'s listing is unchanged. ValueError when
    `copies` is not an int >= 1 or `root` (named) holds no class folder."""
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise ValueError(f"repeated_folder: copies must be an int >= 1, got {copies!r}")
    src = Path(root).resolve()
    classes = sorted(d for d in src.iterdir() if d.is_dir()) if src.is_dir() else []
    if not classes:
        raise ValueError(f"{src}: no class folders to repeat (a folder of class folders "
                         "of files is needed)")
    files = [f for d in classes for f in sorted(d.iterdir()) if f.is_file()]
    listing = [(str(f.relative_to(src)), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key = hashlib.sha256(repr((str(src), copies, listing)).encode()).hexdigest()[:10]
    out = (into or cache_root()) / f"{src.name}-x{copies}-{key}"
    if (out / ".complete").exists():
        return out
    for f, k in ((f, k) for f in files for k in range(copies)):
        link = out / f.parent.name / f"{f.stem}-{k}{f.suffix}"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():  # a run stopped half-way left it
            os.link(f, link)
    (out / ".complete").touch()
    return out


def main(argv=None) -> int:
    """Print a sample set (or --data) repeated `--copies` times, for compare.py --data."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--sample", choices=["default", "large", "real", "h264"], default="real",
                   help="built-in image set, or h264: the 48 H.264 clips of 640x360")
    p.add_argument("--data", help="a folder of class folders instead of a sample set")
    p.add_argument("--copies", type=int, default=8, help="times each file appears")
    args = p.parse_args(argv)
    if args.data:
        root = Path(args.data)
    elif args.sample == "h264":
        from dali_pipes.sample_data.sample_video import video_dataset
        root = video_dataset(size=(640, 360), codec="libx264")
    else:
        from bench.first_run import sample_data
        root = sample_data("image", args.sample, lambda line: print(line, file=sys.stderr))
    print(repeated_folder(root, args.copies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
