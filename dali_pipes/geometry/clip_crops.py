"""Spatial crops of video clips as pure functions of (seed, epoch, key) (numpy only).

`resize="short_side"` (the clip modalities' option): every frame of a clip is resized so its
shorter side is `short_side` pixels, the aspect ratio kept (`resized_shapes`: torchvision's
`resize(img, [short_side])` sizes, the long side `int(short_side * long / short)`), and a
window of the output `size` (H, W) is cut from it (`clip_windows`), the same window for all T
frames of the clip:
- training: a uniform offset, `floor(u * (resized - size + 1))` per axis, from the
  counter-based generator `augment.uniforms` on `augment.STREAM_CLIP_CROP`, keyed by
  (seed, epoch, the sample's augmentation key);
- evaluation: the centre, `round((resized - size) / 2)` per axis (torchvision's `center_crop`);
- multi-view evaluation (`views=(clips, crops)`), crop k of K: K windows evenly spaced along
  the axis with more room (the long side for a square `size`),
  `round(k * (resized - size) / (K - 1))` (left / centre / right for K = 3 on a landscape
  clip, top / centre / bottom on a portrait one; left to right on a tie), centred on the
  other axis; K = 1 is the centre crop.

Windows are (resized height, resized width, top, left) in resized pixels; `source_roi` maps
them back to the source frame for a graph that resizes only the window (DALI's `fn.resize`
with `roi_start` / `roi_end`: the same scale factor as resizing the whole frame, then cropping).
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from dali_pipes.geometry.draws import STREAM_CLIP_CROP, uniforms

ClipResize = Literal["squash", "short_side"]
CLIP_RESIZES = ("squash", "short_side")
SHORT_SIDE_FRACTION = 0.875  # default short side: int(max(size) / 0.875), 256 for 224


def default_short_side(size: tuple[int, int]) -> int:
    """The short side used when none is given: `int(max(size) / 0.875)` (256 for 224, 128
    for 112: torchvision's video classification reference resizes to 128 for 112 crops)."""
    return int(max(size) / SHORT_SIDE_FRACTION)


def resized_shapes(heights, widths, short_side: int) -> np.ndarray:
    """(B, 2) int64 (height, width) of frames resized to `short_side` on their shorter side.

    As torchvision's `resize(img, [short_side])`: the long side is
    `int(short_side * long / short)` (truncated), a square stays square.
    """
    H = np.asarray(heights, dtype=np.int64).reshape(-1)
    W = np.asarray(widths, dtype=np.int64).reshape(-1)
    if np.any(H < 1) or np.any(W < 1):
        raise ValueError(f"frame sizes must be >= 1, got heights {H[:8].tolist()} "
                         f"and widths {W[:8].tolist()}")
    short, long = np.minimum(H, W), np.maximum(H, W)
    new_long = (short_side * long.astype(np.float64) / short).astype(np.int64)
    return np.stack([np.where(H <= W, short_side, new_long),
                     np.where(H <= W, new_long, short_side)], axis=1)


def clip_windows(seed: int, epoch: int, keys, heights, widths, *, size: tuple[int, int],
                 short_side: int, train: bool, crop_id=None, crops: int = 1) -> np.ndarray:
    """(B, 4) int64 windows (resized height, resized width, top, left) of a batch of clips.

    Args:
        seed, epoch, keys: the plan's seed, epoch and the clips' augmentation keys (B,).
        heights, widths: (B,) source frame sizes.
        size: the output (H, W); must fit in every resized frame (short_side >= max(size)).
        short_side: the shorter side after resizing.
        train: random offsets; else centred (or multi-view) windows.
        crop_id: (B,) the spatial view of each clip in [0, crops) (evaluation only).
        crops: spatial views per clip (`views=(clips, crops)`).

    Returns:
        int64 rows; the crop is `size`, so (top, left) fully place it.
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    resized = resized_shapes(heights, widths, short_side)
    if len(resized) != len(keys):
        raise ValueError(f"{len(resized)} frame sizes for {len(keys)} keys")
    room = resized - np.asarray(size, dtype=np.int64)[None, :]
    if np.any(room < 0):
        row = int(np.flatnonzero((room < 0).any(axis=1))[0])
        raise ValueError(f"size={tuple(size)} does not fit in a frame resized to "
                         f"{tuple(resized[row].tolist())} (short_side={short_side})")
    if train:
        u = uniforms(seed, epoch, keys, STREAM_CLIP_CROP, 2)
        offsets = np.minimum(np.floor(u * (room + 1)).astype(np.int64), room)
    else:
        offsets = _eval_offsets(room, crop_id, crops)
    return np.concatenate([resized, offsets], axis=1)


def _eval_offsets(room: np.ndarray, crop_id, crops: int) -> np.ndarray:
    """(B, 2) centred offsets; with crops > 1, crop k evenly spaced along the long axis."""
    offsets = np.round(room / 2.0).astype(np.int64)
    if crops == 1:
        return offsets
    ids = np.broadcast_to(np.asarray(0 if crop_id is None else crop_id, np.int64),
                          (len(room),))
    if np.any((ids < 0) | (ids >= crops)):
        raise ValueError(f"crop_id values {ids[(ids < 0) | (ids >= crops)][:8].tolist()} "
                         f"are outside [0, crops={crops})")
    axis = np.where(room[:, 0] > room[:, 1], 0, 1)  # 0: rows vary (portrait), 1: columns
    rows = np.arange(len(room))
    offsets[rows, axis] = np.round(ids * room[rows, axis] / (crops - 1)).astype(np.int64)
    return offsets


def source_roi(windows: np.ndarray, heights, widths, size: tuple[int, int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """(roi_start, roi_end) float32 (B, 2) as (y, x): each window in source pixels.

    Resizing that region of the source to `size` equals resizing the whole frame to the
    window's resized shape and cutting the window out (the same scale factor per axis).
    """
    windows = np.asarray(windows, dtype=np.float64)
    scale = np.stack([np.asarray(heights, np.float64), np.asarray(widths, np.float64)],
                     axis=1) / windows[:, :2]
    start = windows[:, 2:] * scale
    end = (windows[:, 2:] + np.asarray(size, np.float64)[None, :]) * scale
    return start.astype(np.float32), end.astype(np.float32)


def _positive_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
        and bool(value > 0)


def check_crop_options(*, resize, short_side, views, size: tuple[int, int] | None,
                       train: bool, clips_per_video: int) -> tuple[int | None, int, int]:
    """The clip modalities' resize / crop / view options, checked together.

    Args:
        resize: "squash" (every frame resized to `size`) or "short_side".
        short_side: None (default_short_side) or an int >= max(size); "short_side" only.
        views: None or (clips, crops) for multi-view evaluation.
        size: the checked output (H, W), or None (native resolution).
        train: the modality's train flag.
        clips_per_video: the modality's clips per video.

    Returns:
        (short side, or None for "squash"; temporal clips per video; spatial crops per clip).

    Raises:
        ValueError naming the option, its value and what is allowed.
    """
    if not isinstance(resize, str) or resize not in CLIP_RESIZES:
        raise ValueError(f"resize must be one of {CLIP_RESIZES}, got {resize!r}")
    side = _check_short_side(resize, short_side, size)
    if views is None:
        return side, clips_per_video, 1
    if (not isinstance(views, (tuple, list)) or len(views) != 2
            or not all(_positive_int(v) for v in views)):
        raise ValueError(f"views must be None or (clips, crops), two positive ints, "
                         f"got {views!r}")
    clips, crops = int(views[0]), int(views[1])
    if train:
        raise ValueError(f"views={tuple(views)!r} is multi-view evaluation (uniform clip "
                         f"starts, no flip): pass train=False")
    if clips_per_video != 1:
        raise ValueError(f"views={tuple(views)!r} sets the clips per video itself: leave "
                         f"clips_per_video at 1, got {clips_per_video!r}")
    if crops > 1 and side is None:
        raise ValueError(f"views={tuple(views)!r} with {crops} crops needs "
                         f"resize='short_side' (with resize={resize!r} every crop would "
                         f"be the whole frame)")
    return side, clips, crops


def _check_short_side(resize: str, short_side, size) -> int | None:
    if resize == "squash":
        if short_side is not None:
            raise ValueError(f"short_side={short_side!r} applies to resize='short_side' "
                             f"only (resize='squash' resizes every frame to size)")
        return None
    if size is None:
        raise ValueError("resize='short_side' crops size=(H, W) from the resized frames: "
                         "size must not be None")
    if short_side is None:
        return default_short_side(size)
    if not _positive_int(short_side) or short_side < max(size):
        raise ValueError(f"short_side must be an int >= max(size)={max(size)} (the crop "
                         f"must fit in every frame), got {short_side!r}")
    return int(short_side)
