"""The loaders we measure ourselves against, built the way their users build them.

- "classic": torchvision ImageFolder + PIL + transforms (RandomResizedCrop, flip,
  ToTensor, Normalize), a DataLoader with 2 workers: the textbook PyTorch pipeline.
- "dali-stock": DALI's own recipe: fn.readers.file + decoders.image + random_resized_crop
  + crop_mirror_normalize, read by DALI's DALIGenericIterator.
Both yield dicts with "image" and "label", like our loaders.
"""
from __future__ import annotations

import torch

from dali_pipes.pipelines.image import IMAGENET_MEAN, IMAGENET_STD


class _DictBatches:
    """Adapts an iterable of (image, label) pairs or DALI output lists to dict batches."""

    def __init__(self, inner, to_dict, length: int):
        self.inner, self.to_dict, self.length = inner, to_dict, length

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        for item in self.inner:
            yield self.to_dict(item)


def classic_loader(root, *, batch_size: int, size: int = 224, num_workers: int = 2,
                   device: str = "cpu", seed: int = 0):
    from torchvision import datasets, transforms

    tf = transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    ds = datasets.ImageFolder(str(root), transform=tf)
    gen = torch.Generator().manual_seed(seed)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=batch_size, shuffle=True, num_workers=num_workers, generator=gen,
        pin_memory=device.startswith("cuda"), persistent_workers=num_workers > 0)
    dev = torch.device(device)
    return _DictBatches(dl, lambda b: {"image": b[0].to(dev, non_blocking=True),
                                       "label": b[1].to(dev)}, len(dl))


def dali_stock_loader(root, *, batch_size: int, size: int = 224, num_threads: int = 2,
                      device: str = "cpu", seed: int = 0):
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    gpu = device.startswith("cuda")

    @pipeline_def(batch_size=batch_size, num_threads=num_threads,
                  device_id=(torch.device(device).index or 0) if gpu else None, seed=seed)
    def stock():
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True,
                                        name="reader")
        images = fn.decoders.image(jpegs, device="mixed" if gpu else "cpu",
                                   output_type=types.RGB)
        images = fn.random_resized_crop(images, size=[size, size])
        images = fn.crop_mirror_normalize(
            images, mirror=fn.random.coin_flip(), dtype=types.FLOAT, output_layout="CHW",
            mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
        return images, labels.gpu() if gpu else labels

    pipe = stock()
    pipe.build()
    it = DALIGenericIterator(pipe, ["image", "label"], reader_name="reader",
                             last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
    return _DictBatches(it, lambda b: {"image": b[0]["image"],
                                       "label": b[0]["label"].view(-1).long()}, len(it))
