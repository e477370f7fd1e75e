"""Image training-recipe options, validated once, shared by both backends (numpy only).

`image_recipe(**options)` turns the `make_loader("image", ...)` recipe options into a frozen
`ImageRecipe` (the output size, train, and one group per stage: `Crop`, `Output`,
`Photometric`, `Policy`, `Erasing`, `Mixing`), raising ValueError naming the option, the value
and the allowed range for anything out of range, so a bad option fails at make_loader time
and not at the first batch.
With every option at its default, `ImageRecipe.is_default_graph` holds and the DALI graph is
exactly today's (no operator is added unless an option asks for it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from dali_pipes.option_groups import expand, group, leaves
from dali_pipes.recipes._groups import Crop, Erasing, Mixing, Output, Photometric, Policy
from dali_pipes.schema import IMAGENET_MEAN, IMAGENET_STD

INTERPOLATIONS = ("bilinear", "bicubic", "lanczos", "nearest")
DTYPES = ("float32", "float16", "bfloat16", "uint8")
MEMORY_FORMATS = ("contiguous", "channels_last")
MIX_MODES = ("batch", "elem")
CHANNELS = 3  # decoded images are RGB


@dataclass(frozen=True)
class ImageRecipe:
    """Every recipe option after validation (see docs/recipes.md): the output `size` and
    `train`, and one group per stage (`dali_pipes.recipes._groups`)."""

    size: tuple[int, int] = (224, 224)  # (H, W) at epoch 0
    # None, ((first_epoch, (H, W)), ...) sorted, or a function epoch -> size (derived from
    # the `size` option, not an option of its own)
    schedule: Any = field(default=None, metadata={"option": False})
    train: bool = True
    crop: Crop = group(Crop)
    output: Output = group(Output)
    photometric: Photometric = group(Photometric)
    policy: Policy = group(Policy)
    erasing: Erasing = group(Erasing)
    mixing: Mixing = group(Mixing)

    @property
    def normalize(self) -> bool:
        """Whether pixels are normalised (not for dtype uint8)."""
        return self.output.normalize

    @property
    def is_default_graph(self) -> bool:
        """True when the DALI graph is the default one (bilinear, ImageNet normalisation,
        float32 CHW, no vertical flip): no option changes what the graph computes."""
        out = self.output
        return (self.crop.interpolation == "bilinear" and out.mean == IMAGENET_MEAN
                and out.std == IMAGENET_STD and out.dtype == "float32"
                and out.memory_format == "contiguous" and self.crop.vflip == 0
                and not self.photometric.active and not self.policy.active
                and self.schedule is None)

    def pixel_mean_std(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(mean, std) with one value per RGB channel on the 0..255 scale."""
        mean, std = self.output.mean, self.output.std
        mean = mean * CHANNELS if len(mean) == 1 else mean
        std = std * CHANNELS if len(std) == 1 else std
        return tuple(m * 255 for m in mean), tuple(s * 255 for s in std)


# make_loader option names (flat keywords; "schedule" comes from `size`) and their
# defaults: the fields of ImageRecipe and its groups are the one place a default is written.
RECIPE_DEFAULTS = {name: leaf.default for name, leaf in leaves(ImageRecipe).items()}
RECIPE_OPTIONS = frozenset(RECIPE_DEFAULTS)
POLICY_OPTIONS = tuple(leaves(Policy))
PHOTOMETRIC_OPTIONS = tuple(leaves(Photometric))
BATCH_OPTIONS = (*leaves(Erasing), *leaves(Mixing))


def _fail(name: str, value, allowed: str):
    raise ValueError(f"image option {name}={value!r} is out of range: expected {allowed}")


def _number(name: str, value, lo: float, hi: float, *, lo_open=False, hi_open=False) -> float:
    """`value` as a float within [lo, hi] (open ends as asked); ValueError otherwise."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and (value < hi if hi_open else
                                                               value <= hi)
    if not ok:
        _fail(name, value, f"a number in {'(' if lo_open else '['}{lo}, {hi}"
                           f"{')' if hi_open else ']'}")
    return float(value)


def _pair(name: str, value, lo: float, hi: float, *, lo_open: bool) -> tuple[float, float]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        _fail(name, value, f"a (min, max) pair within {'(' if lo_open else '['}{lo}, {hi}]")
    try:
        a, b = (_number(name, v, lo, hi, lo_open=lo_open) for v in value)
    except ValueError:
        _fail(name, tuple(value), f"a (min, max) pair within {'(' if lo_open else '['}{lo}, "
                                  f"{hi}]")
    if a > b:
        _fail(name, value, "min <= max")
    return a, b


def _size(value) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                       for v in value)):
        _fail("size", value, "a positive int or an (H, W) pair of positive ints")
    return int(value[0]), int(value[1])


def _size_schedule(value) -> tuple[tuple[int, int], Any]:
    """(size at epoch 0, schedule) from an int, (H, W), {first_epoch: size} or a function."""
    if callable(value):
        return _size(value(0)), value
    if not isinstance(value, dict):
        return _size(value), None
    if not value or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0
                            for k in value) or min(value) != 0:
        _fail("size", value, "a {first_epoch: size} table with int epochs >= 0, starting "
                             "at epoch 0")
    table = tuple(sorted((k, _size(v)) for k, v in value.items()))
    return table[0][1], table


def size_at(recipe: ImageRecipe, epoch: int) -> tuple[int, int]:
    """The output (H, W) of `epoch` under the recipe's resolution schedule.

    Args:
        recipe: the validated recipe.
        epoch: the plan's epoch.

    Returns:
        (H, W); ValueError naming the epoch if a size function returns a bad size.
    """
    if recipe.schedule is None:
        return recipe.size
    if callable(recipe.schedule):
        try:
            return _size(recipe.schedule(epoch))
        except ValueError as exc:
            raise ValueError(f"size function at epoch {epoch}: {exc}") from exc
    return [size for first, size in recipe.schedule if first <= epoch][-1]


def _channels(name: str, value, positive: bool) -> tuple[float, ...]:
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(vals) not in (1, CHANNELS):
        _fail(name, value, f"1 or {CHANNELS} values (one per RGB channel)")
    lo = 0.0 if positive else -math.inf
    return tuple(_number(name, v, lo, math.inf, lo_open=positive, hi_open=True) for v in vals)


def _choice(name: str, value, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        _fail(name, value, f"one of {', '.join(allowed)}")
    return value


def image_recipe(**given: Any) -> ImageRecipe:
    """A validated `ImageRecipe` from make_loader's image options: the one validator of
    recipe options, whether they come as keywords, from a recipe TOML or a preset.

    Args:
        **given: any of RECIPE_OPTIONS (docs/recipes.md), or a group keyword (`crop`,
            `output`, `photometric`, `policy`, `erasing`, `mixing`) with the group or a
            dict of its fields; the rest keep ImageRecipe's defaults.

    Returns:
        The frozen recipe; ValueError naming option, value and allowed range otherwise,
        or a flat option and its group that disagree.
    """
    given = expand(given, (ImageRecipe,), where="image recipe")
    unknown = sorted(set(given) - RECIPE_OPTIONS)
    if unknown:
        raise ValueError(f"unknown image recipe option(s) {', '.join(unknown)}")
    o = {**RECIPE_DEFAULTS, **given}
    first_size, schedule = _size_schedule(o["size"])
    return ImageRecipe(size=first_size, schedule=schedule, train=bool(o["train"]),
                       crop=_crop(o), output=_output(o), photometric=_photometric(o),
                       policy=_policy(o), erasing=_erasing(o), mixing=_mixing(o))


def _crop(o: dict[str, Any]) -> Crop:
    """The crop window's ranges, the resize kernel, the eval crop fraction, the flips."""
    return Crop(scale=_pair("scale", o["scale"], 0.0, 1.0, lo_open=True),
                ratio=_pair("ratio", o["ratio"], 0.0, math.inf, lo_open=True),
                interpolation=_choice("interpolation", o["interpolation"], INTERPOLATIONS),
                crop_pct=_number("crop_pct", o["crop_pct"], 0.0, 1.0, lo_open=True),
                hflip=_number("hflip", o["hflip"], 0.0, 1.0),
                vflip=_number("vflip", o["vflip"], 0.0, 1.0))


def _output(o: dict[str, Any]) -> Output:
    """Normalisation (1 or 3 values each), dtype and memory format."""
    return Output(mean=_channels("mean", o["mean"], False),
                  std=_channels("std", o["std"], True),
                  dtype=_choice("dtype", o["dtype"], DTYPES),
                  memory_format=_choice("memory_format", o["memory_format"], MEMORY_FORMATS))


def _policy(o: dict[str, Any]) -> Policy:
    """The augmentation policy, RandAugment's num_ops (1..8) and magnitude (0..30)."""
    from dali_pipes.recipes.policies import MAX_MAGNITUDE, POLICIES
    auto_augment, num_ops = o["auto_augment"], o["num_ops"]
    if auto_augment is not None:
        _choice("auto_augment", auto_augment, POLICIES)
    if not isinstance(num_ops, int) or isinstance(num_ops, bool) or not 1 <= num_ops <= 8:
        _fail("num_ops", num_ops, "an int in [1, 8]")
    return Policy(auto_augment=auto_augment, num_ops=num_ops,
                  magnitude=_number("magnitude", o["magnitude"], 0.0, MAX_MAGNITUDE),
                  magnitude_std=_number("magnitude_std", o["magnitude_std"], 0.0, math.inf,
                                        hi_open=True))


def _photometric(o: dict[str, Any]) -> Photometric:
    """Colour jitter (a float: brightness, contrast, saturation; or a 3- or 4-tuple adding
    hue), grayscale and blur probabilities, blur sigma range and kernel size."""
    color_jitter, blur_kernel = o["color_jitter"], o["blur_kernel"]
    cj = color_jitter if isinstance(color_jitter, (tuple, list)) else (color_jitter,) * 3
    if len(cj) not in (3, 4):
        _fail("color_jitter", color_jitter, "a number or (brightness, contrast, saturation"
                                            "[, hue]) of numbers >= 0")
    cj = tuple(_number("color_jitter", v, 0.0, math.inf, hi_open=True) for v in cj)
    if len(cj) == 4 and cj[3] > 0.5:
        _fail("color_jitter", color_jitter, "hue in [0, 0.5] (turns)")
    if not isinstance(blur_kernel, int) or blur_kernel < 1 or blur_kernel % 2 == 0:
        _fail("blur_kernel", blur_kernel, "a positive odd int")
    return Photometric(color_jitter=cj + (0.0,) * (4 - len(cj)),
                       grayscale=_number("grayscale", o["grayscale"], 0.0, 1.0),
                       blur=_number("blur", o["blur"], 0.0, 1.0),
                       blur_sigma=_pair("blur_sigma", o["blur_sigma"], 0.0, math.inf,
                                        lo_open=True),
                       blur_kernel=blur_kernel)


def _erasing(o: dict[str, Any]) -> Erasing:
    """Random erasing (applied to whole batches, after normalisation)."""
    p = _number("erasing", o["erasing"], 0.0, 1.0)
    if p > 0 and o["dtype"] == "uint8":
        _fail("erasing", o["erasing"], "0 with dtype='uint8' (erasing follows normalisation)")
    value = o["erasing_value"]
    if value != "random":
        _number("erasing_value", value, -math.inf, math.inf, lo_open=True, hi_open=True)
    return Erasing(p=p, scale=_pair("erasing_scale", o["erasing_scale"], 0.0, 1.0,
                                    lo_open=True),
                   ratio=_pair("erasing_ratio", o["erasing_ratio"], 0.0, math.inf,
                               lo_open=True),
                   value=value)


def _mixing(o: dict[str, Any]) -> Mixing:
    """Batch mixing and soft targets."""
    num_classes = o["num_classes"]
    if num_classes is not None and (not isinstance(num_classes, int)
                                    or isinstance(num_classes, bool) or num_classes < 1):
        _fail("num_classes", num_classes, "None or a positive int")
    return Mixing(mixup=_number("mixup", o["mixup"], 0.0, math.inf, hi_open=True),
                  cutmix=_number("cutmix", o["cutmix"], 0.0, math.inf, hi_open=True),
                  mix_prob=_number("mix_prob", o["mix_prob"], 0.0, 1.0),
                  switch_prob=_number("switch_prob", o["switch_prob"], 0.0, 1.0),
                  mix_mode=_choice("mix_mode", o["mix_mode"], MIX_MODES),
                  label_smoothing=_number("label_smoothing", o["label_smoothing"], 0.0, 1.0,
                                          hi_open=True),
                  num_classes=num_classes)


def check_num_classes(recipe: ImageRecipe, labels) -> int:
    """The class count targets use: `recipe.num_classes`, or max(label) + 1.

    Args:
        recipe: the validated recipe.
        labels: the data set's int labels (numpy array).

    Returns:
        The number of classes; ValueError when num_classes is smaller than a label.
    """
    top = int(labels.max()) + 1 if len(labels) else 1
    num_classes = recipe.mixing.num_classes
    if num_classes is None:
        return top
    if num_classes < top:
        _fail("num_classes", num_classes, f"at least {top} (the data set has label {top - 1})")
    return num_classes
