"""The loaders we measure ourselves against, built the way their users build them.

- "classic": torchvision ImageFolder + PIL + transforms (RandomResizedCrop, flip,
  ToTensor, Normalize), a DataLoader with 2 workers: the textbook PyTorch pipeline.
- "dali-stock": DALI's own recipe, as its ResNet-50 training example writes it:
  fn.readers.file + decoders.image_random_crop (the crop window decoded, not the whole
  file) + resize + crop_mirror_normalize, read by DALI's DALIGenericIterator.
- "usual" (with a training recipe): the recipe written the usual way, ImageFolder + PIL +
  torchvision.transforms.v2 in a DataLoader with 2 workers and timm-style mixup / cutmix on
  the batch in the training loop (`usual_loader`, `Mixup`).
All yield dicts with "image" and "label" (and "target" when a recipe mixes), like ours.
"""
from __future__ import annotations

from typing import cast

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
    from nvidia.dali.data_node import DataNode
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    gpu = device.startswith("cuda")

    @pipeline_def(batch_size=batch_size, num_threads=num_threads,
                  device_id=(torch.device(device).index or 0) if gpu else None, seed=seed)
    def stock():
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True,
                                        name="reader")
        crops = fn.decoders.image_random_crop(
            jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
            random_aspect_ratio=[0.75, 4 / 3], random_area=[0.08, 1.0], num_attempts=100)
        resized = cast(DataNode, fn.resize(crops, resize_x=size, resize_y=size))
        images = fn.crop_mirror_normalize(
            resized, mirror=fn.random.coin_flip(), dtype=types.FLOAT, output_layout="CHW",
            mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD])
        return images, labels.gpu() if gpu else labels

    pipe = stock()
    pipe.build()
    it = DALIGenericIterator(pipe, ["image", "label"], reader_name="reader",
                             last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
    return _DictBatches(it, lambda b: {"image": b[0]["image"],
                                       "label": b[0]["label"].view(-1).long()}, len(it))


class Mixup:
    """timm's `Mixup` written plainly (batch mode): one lambda per batch from Beta(alpha,
    alpha), cutmix with `switch_prob` when both alphas are set, the batch mixed with its
    flipped self in place, smoothed one-hot targets mixed by the (area-corrected) lambda."""

    def __init__(self, *, mixup_alpha: float, cutmix_alpha: float, prob: float,
                 switch_prob: float, label_smoothing: float, num_classes: int, seed: int = 0):
        import numpy as np
        self.mixup_alpha, self.cutmix_alpha, self.prob = mixup_alpha, cutmix_alpha, prob
        self.switch_prob, self.smoothing = switch_prob, label_smoothing
        self.num_classes, self.rng = num_classes, np.random.default_rng(seed)

    def _params(self) -> tuple[float, bool]:
        use_cutmix = self.cutmix_alpha > 0 and (
            self.mixup_alpha <= 0 or self.rng.random() < self.switch_prob)
        alpha = self.cutmix_alpha if use_cutmix else self.mixup_alpha
        if alpha <= 0 or self.rng.random() >= self.prob:
            return 1.0, False
        return float(self.rng.beta(alpha, alpha)), use_cutmix

    def _box(self, lam: float, height: int, width: int) -> tuple[int, int, int, int, float]:
        ratio = (1 - lam) ** 0.5
        cut_h, cut_w = int(height * ratio), int(width * ratio)
        cy, cx = int(self.rng.integers(height)), int(self.rng.integers(width))
        top, bottom = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, height)
        left, right = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, width)
        return top, bottom, left, right, 1 - (bottom - top) * (right - left) / (height * width)

    def _targets(self, labels: torch.Tensor, lam: float) -> torch.Tensor:
        off = self.smoothing / self.num_classes
        one_hot = torch.full((len(labels), self.num_classes), off, device=labels.device)
        one_hot.scatter_(1, labels.view(-1, 1), 1 - self.smoothing + off)
        return one_hot * lam + one_hot.flip(0) * (1 - lam)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        lam, use_cutmix = self._params()
        if use_cutmix:
            top, bottom, left, right, lam = self._box(lam, *images.shape[-2:])
            images[:, :, top:bottom, left:right] = images.flip(0)[:, :, top:bottom, left:right]
        elif lam != 1.0:
            flipped = images.flip(0).mul_(1 - lam)  # a copy, taken before images change
            images.mul_(lam).add_(flipped)
        return images, self._targets(labels, lam)


def _usual_transform(recipe):
    """torchvision.transforms.v2 for an `ImageRecipe`, in the order people write them."""
    from torchvision.transforms import InterpolationMode, v2

    interp = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC,
              "lanczos": InterpolationMode.LANCZOS, "nearest": InterpolationMode.NEAREST}
    crop, photo, out = recipe.crop, recipe.photometric, recipe.output
    steps: list = [v2.RandomResizedCrop(recipe.size, scale=crop.scale, ratio=crop.ratio,
                                        interpolation=interp[crop.interpolation],
                                        antialias=True)]
    if crop.hflip > 0:
        steps.append(v2.RandomHorizontalFlip(crop.hflip))
    if crop.vflip > 0:
        steps.append(v2.RandomVerticalFlip(crop.vflip))
    policy = {"randaugment": lambda: v2.RandAugment(recipe.policy.num_ops,
                                                    int(round(recipe.policy.magnitude))),
              "trivialaugment": v2.TrivialAugmentWide,
              "autoaugment": v2.AutoAugment}.get(recipe.policy.auto_augment)
    if policy is not None:  # torchvision has no magnitude_std: the bin is fixed
        steps.append(policy())
    if any(photo.color_jitter):
        steps.append(v2.ColorJitter(*photo.color_jitter))
    if photo.grayscale > 0:
        steps.append(v2.RandomGrayscale(photo.grayscale))
    if photo.blur > 0:
        steps.append(v2.RandomApply([v2.GaussianBlur(photo.blur_kernel, photo.blur_sigma)],
                                    p=photo.blur))
    steps.append(v2.ToImage())
    if recipe.normalize:
        steps += [v2.ToDtype(torch.float32, scale=True),
                  v2.Normalize(list(_per_channel(out.mean)), list(_per_channel(out.std)))]
    if recipe.erasing.p > 0:
        value = "random" if recipe.erasing.value == "random" else float(recipe.erasing.value)
        steps.append(v2.RandomErasing(recipe.erasing.p, scale=recipe.erasing.scale,
                                      ratio=recipe.erasing.ratio, value=value))
    return v2.Compose(steps)


def _per_channel(values: tuple[float, ...]) -> tuple[float, ...]:
    return values * 3 if len(values) == 1 else values


def usual_loader(root, *, recipe: str, batch_size: int, size: int | None = None,
                 num_workers: int = 2, device: str = "cpu", seed: int = 0):
    """The recipe as people usually write it: ImageFolder + PIL + torchvision.transforms.v2
    in a DataLoader, mixup / cutmix (`Mixup`) on the batch in the training loop, then the
    dtype and memory format. A speed baseline only: its randomness is its own.

    Args:
        root: a folder of class folders of JPEGs.
        recipe: a recipe preset name or a TOML path (`dali_pipes.recipes.files`).
        batch_size, num_workers, device, seed: as for the other baselines.
        size: the output side instead of the recipe's (None: the recipe's).
    """
    from torchvision import datasets

    from dali_pipes.recipes import image_recipe
    from dali_pipes.recipes.files import load_recipe

    options = load_recipe(recipe, train=True)
    if size is not None:
        options["size"] = size
    rec = image_recipe(**options)
    mix = rec.mixing
    if mix.active and mix.mix_mode != "batch":
        raise ValueError(f"usual baseline: mix_mode={mix.mix_mode!r} is not written here "
                         "(only 'batch', as the shipped presets use)")
    ds = datasets.ImageFolder(str(root), transform=_usual_transform(rec))
    gen = torch.Generator().manual_seed(seed)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=batch_size, shuffle=True, num_workers=num_workers, generator=gen,
        pin_memory=device.startswith("cuda"), persistent_workers=num_workers > 0)
    dev = torch.device(device)
    mixup = Mixup(mixup_alpha=mix.mixup, cutmix_alpha=mix.cutmix, prob=mix.mix_prob,
                  switch_prob=mix.switch_prob, label_smoothing=mix.label_smoothing,
                  num_classes=mix.num_classes or len(ds.classes), seed=seed) \
        if mix.active else None
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(rec.output.dtype)
    memory = torch.channels_last if rec.output.memory_format == "channels_last" else None

    def in_the_loop(pair) -> dict:
        images, labels = pair[0].to(dev, non_blocking=True), pair[1].to(dev)
        out = {"label": labels}
        if mixup is not None:
            images, out["target"] = mixup(images, labels)
        if memory is not None:
            images = images.contiguous(memory_format=memory)
        out["image"] = images.to(dtype) if dtype is not None else images
        return out

    return _DictBatches(dl, in_the_loop, len(dl))
