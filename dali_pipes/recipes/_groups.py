"""The option groups of the image recipe, one per stage (numpy only).

Each is a keyword of `make_loader("image", ...)` taking the group (`mixing=Mixing(mixup=0.2)`:
every field set) or a dict of some of its fields (`mixing={"mixup": 0.2}`); each field is
also a flat keyword, its shorthand (`mixup=0.2`), named as the field except where a prefix
says which stage it belongs to (`Erasing.scale` is `erasing_scale`). `image_recipe`
(`dali_pipes.recipes._options`) validates them; the values here are the defaults.
"""
from __future__ import annotations

from dataclasses import dataclass

from dali_pipes.option_groups import shorthand
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD


@dataclass(frozen=True)
class Crop:
    """The crop and its flips: RandomResizedCrop's area `scale` and aspect `ratio` ranges
    (training), the evaluation centre crop's `crop_pct` (shorter side resized to
    size / crop_pct), the resize `interpolation` ("bilinear", "bicubic", "lanczos",
    "nearest") and the horizontal / vertical flip probabilities."""

    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    interpolation: str = "bilinear"
    crop_pct: float = 0.875
    hflip: float = 0.5
    vflip: float = 0.0


@dataclass(frozen=True)
class Output:
    """What the batch's "image" holds: normalised with `mean` / `std` (1 or 3 values, on
    the 0..1 scale), as `dtype` ("float32", "float16", "bfloat16"; "uint8" skips
    normalisation) in `memory_format` ("contiguous" or "channels_last")."""

    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    dtype: str = "float32"
    memory_format: str = "contiguous"

    @property
    def normalize(self) -> bool:
        """Whether pixels are normalised (not for dtype uint8)."""
        return self.dtype != "uint8"


@dataclass(frozen=True)
class Photometric:
    """Colour jitter (brightness, contrast, saturation[, hue]; a number sets the first
    three), grayscale and blur probabilities, blur sigma range and kernel size."""

    color_jitter: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    grayscale: float = 0.0
    blur: float = 0.0
    blur_sigma: tuple[float, float] = (0.1, 2.0)
    blur_kernel: int = 9

    @property
    def jitters(self) -> bool:
        """Whether the graph adds colour jitter or grayscale (input "jitter")."""
        return any(self.color_jitter) or self.grayscale > 0

    @property
    def active(self) -> bool:
        """Whether the graph adds colour jitter, grayscale or blur."""
        return self.jitters or self.blur > 0


@dataclass(frozen=True)
class Policy:
    """The augmentation policy: `auto_augment` None, "trivialaugment", "randaugment" or
    "autoaugment"; RandAugment's `num_ops` (1..8), `magnitude` (0..30) and the standard
    deviation of its per-operation noise `magnitude_std`."""

    auto_augment: str | None = None
    num_ops: int = 2
    magnitude: float = 9
    magnitude_std: float = 0.0

    @property
    def active(self) -> bool:
        """Whether a policy runs."""
        return self.auto_augment is not None


@dataclass(frozen=True)
class Erasing:
    """Random erasing after normalisation: probability `p` (shorthand `erasing`), the
    erased area's `scale` and aspect `ratio` ranges, its `value` (a constant in
    normalised units, or "random": per-pixel normal noise)."""

    p: float = shorthand("erasing", 0.0)
    scale: tuple[float, float] = shorthand("erasing_scale", (0.02, 1 / 3))
    ratio: tuple[float, float] = shorthand("erasing_ratio", (0.3, 3.3))
    value: float | str = shorthand("erasing_value", 0.0)

    @property
    def active(self) -> bool:
        """Whether any image may be erased."""
        return self.p > 0


@dataclass(frozen=True)
class Mixing:
    """Batch mixing and soft targets: the Beta alphas of `mixup` and `cutmix` (0
    disables), the probability a batch is mixed (`mix_prob`) and uses cutmix when both are
    on (`switch_prob`), `mix_mode` ("batch" or "elem"), `label_smoothing` and
    `num_classes` (None: max(label) + 1)."""

    mixup: float = 0.0
    cutmix: float = 0.0
    mix_prob: float = 1.0
    switch_prob: float = 0.5
    mix_mode: str = "batch"
    label_smoothing: float = 0.0
    num_classes: int | None = None

    @property
    def active(self) -> bool:
        """Whether batches carry a soft "target" (mixup, cutmix or label smoothing)."""
        return self.mixup > 0 or self.cutmix > 0 or self.label_smoothing > 0
