"""The detection modality's geometry options, validated once (numpy only).

ValueError names the option, the value and what is allowed. `DetectionOptions.geometry`
gives a batch's `dali_pipes.geometry.boxes.Geometry` from the plan's (seed, epoch, keys).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dali_pipes.geometry import boxes as geo
from dali_pipes.geometry.boxes import DetectionCrop
from dali_pipes.option_groups import build, expand, group

MAX_SIZE_RATIO = 1333 / 800  # torchvision's detection default: min_size 800, max_size 1333
__all__ = ["DetectionCrop", "DetectionOptions", "detection_options"]


@dataclass(frozen=True)
class DetectionOptions:
    """The geometry options (validated by `detection_options`): the canvas `size`, `train`,
    `fit`, `max_size`, `pad_to_multiple`, the training `crop`, `min_box_size`; `canvas`,
    derived, is the output (H, W) of every batch."""

    size: tuple[int, int] = (512, 512)
    train: bool = True
    fit: str = "longer"
    max_size: int | None = None
    pad_to_multiple: int | None = None
    crop: DetectionCrop = group(DetectionCrop)
    min_box_size: float = 1.0
    canvas: tuple[int, int] = field(default=(512, 512), metadata={"option": False})

    def geometry(self, seed: int, epoch: int, keys, heights, widths,
                 boxes: list[np.ndarray]) -> geo.Geometry:
        """The batch's geometry (eval, random resized crop or large-scale jitter)."""
        if not self.train:
            return geo.eval_geometry(heights, widths, self.canvas, fit=self.fit,
                                     size=min(self.size), max_size=self.max_size)
        return geo.train_geometry(seed, epoch, keys, heights, widths, boxes, self.canvas,
                                  self.crop)


def _pair(name: str, value, *, lo: float, hi: float = math.inf, ints: bool = False
          ) -> tuple:
    ok = isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        and (not ints or float(v).is_integer()) for v in value)
    if not ok or not (lo <= value[0] <= value[1] <= hi) or value[0] <= 0:
        kind = "positive ints" if ints else "numbers"
        raise ValueError(f"{name}={value!r}: expected two {kind} (low, high) with "
                         f"0 < low <= high{f' <= {hi:g}' if hi < math.inf else ''}")
    return (int(value[0]), int(value[1])) if ints else (float(value[0]), float(value[1]))


def _size(size) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        if size < 1:
            raise ValueError(f"size={size!r}: expected a positive int or (H, W)")
        return int(size), int(size)
    return _pair("size", size, lo=1, ints=True)


def _unit(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}={value!r}: expected a number in [0, 1]")
    return float(value)


def detection_options(**given: Any) -> DetectionOptions:
    """Check every option (ValueError naming it) and compute the canvas.

    Args:
        **given: DetectionOptions' options as flat keywords (`scale=...`), or `crop` as a
            `DetectionCrop` or a dict of its fields; the rest keep their defaults.
    """
    o = build(DetectionOptions, expand(given, (DetectionOptions,), where="detection"))
    hw = _size(o.size)
    canvas, max_size = _canvas(hw, o.size, o.fit, o.max_size, o.pad_to_multiple)
    crop = _crop(o.crop)
    min_box_size = o.min_box_size
    if isinstance(min_box_size, bool) or not isinstance(min_box_size, (int, float)) \
            or min_box_size < 0:
        raise ValueError(f"min_box_size={min_box_size!r}: expected a number >= 0 (pixels)")
    return DetectionOptions(size=hw, train=bool(o.train), fit=o.fit, max_size=max_size,
                            pad_to_multiple=o.pad_to_multiple, crop=crop,
                            min_box_size=float(min_box_size), canvas=canvas)


def _canvas(hw: tuple[int, int], size, fit: str, max_size, pad_to_multiple
            ) -> tuple[tuple[int, int], int | None]:
    """(the canvas (H, W), max_size) of the size, fit and padding options."""
    if fit not in ("longer", "shorter"):
        raise ValueError(f"fit={fit!r}: expected 'longer' or 'shorter'")
    if fit == "shorter":
        if hw[0] != hw[1]:
            raise ValueError(f"fit='shorter' takes an int size (the shorter side), got "
                             f"size={size!r}")
        max_size = round(hw[0] * MAX_SIZE_RATIO) if max_size is None else max_size
        if not isinstance(max_size, (int, np.integer)) or max_size < hw[0]:
            raise ValueError(f"max_size={max_size!r}: expected an int >= size ({hw[0]})")
        canvas = (int(max_size), int(max_size))
    elif max_size is not None:
        raise ValueError(f"max_size={max_size!r} applies only with fit='shorter'")
    else:
        canvas = hw
    if pad_to_multiple is not None:
        if not isinstance(pad_to_multiple, (int, np.integer)) or pad_to_multiple < 1:
            raise ValueError(f"pad_to_multiple={pad_to_multiple!r}: expected a positive int "
                             f"or None")
        canvas = (-(-canvas[0] // pad_to_multiple) * pad_to_multiple,
                  -(-canvas[1] // pad_to_multiple) * pad_to_multiple)
    return (int(canvas[0]), int(canvas[1])), max_size


def _crop(crop: DetectionCrop) -> DetectionCrop:
    """The training crop options, checked."""
    attempts = crop.crop_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, (int, np.integer)) \
            or attempts < 1:
        raise ValueError(f"crop_attempts={attempts!r}: expected an int >= 1")
    return DetectionCrop(
        scale=_pair("scale", crop.scale, lo=0.0, hi=1.0),
        ratio=_pair("ratio", crop.ratio, lo=0.0),
        min_iou=None if crop.min_iou is None else _unit("min_iou", crop.min_iou),
        crop_attempts=int(attempts), hflip=_unit("hflip", crop.hflip),
        scale_jitter=None if crop.scale_jitter is None else _pair(
            "scale_jitter", crop.scale_jitter, lo=0.0))
