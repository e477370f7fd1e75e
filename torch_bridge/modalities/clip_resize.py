"""Resize (and crop) of clips with torchvision: the torch path's kernel, also used in the feed.

`resize_crop` is the torch reference path's call: antialiased bilinear resize to `size`
(resize="squash"), or to the plan's resized shape followed by the plan's crop window
(resize="short_side", windows from `dali_pipes.geometry.clip_crops`). A clip that goes through the
PyAV fallback on the DALI backend is already decoded in Python; `resize_clip` resizes (and
crops) it there with the same call, which is cheaper than DALI's CPU resize (measured in
docs/measurements.md), ships an eighth of the bytes from feed workers, and gives the same
pixels as the torch path. The video graph then resizes only the clips DALI decodes itself
(dali_pipes.pipelines.video), from the window `roi_feeds` / `crop_feeds` give it.
`decode_scaled` is the `scaled_decode` option's counterpart of `resize_clip` (both paths):
the decoder scales the frames (swscale), the window is then cut in numpy.
"""
from __future__ import annotations

import numpy as np
import torch

from dali_pipes.geometry.clip_crops import source_roi

CROP_FEEDS = ("crop_start", "crop_end")  # dali_pipes.schema.CLIP_CROP_INPUTS


def resize_crop(clip: torch.Tensor, size: tuple[int, int] | None,
                window: np.ndarray | None = None) -> torch.Tensor:
    """uint8 (T, 3, H, W) frames resized to `size`, or with a window resized and cropped.

    Args:
        clip: decoded frames, channels first.
        size: output (height, width), or None for native resolution.
        window: None (resize to `size`), or the clip's (resized height, resized width,
            top, left): resize to the first two, then crop `size` at (top, left).

    Returns:
        (T, 3, size[0], size[1]) uint8 (a view of `clip` when nothing changes).
    """
    from torchvision.transforms.v2 import functional as F

    if size is None:
        return clip
    shape = list(size) if window is None else [int(window[0]), int(window[1])]
    if tuple(clip.shape[-2:]) != tuple(shape):
        clip = F.resize(clip, shape, antialias=True,
                        interpolation=F.InterpolationMode.BILINEAR)
    if window is not None:
        clip = F.crop(clip, int(window[2]), int(window[3]), int(size[0]), int(size[1]))
    return clip


def resize_clip(clip: np.ndarray, size: tuple[int, int] | None,
                window: np.ndarray | None = None) -> np.ndarray:
    """(T, H, W, 3) uint8 frames through `resize_crop`; unchanged when size is None.

    Args:
        clip: decoded frames, channels last.
        size: output (height, width), or None for native resolution.
        window: the clip's crop window (see `resize_crop`), or None.

    Returns:
        (T, size[0], size[1], 3) uint8, C-contiguous.
    """
    if size is None or (window is None and clip.shape[1:3] == tuple(size)):
        return clip
    frames = resize_crop(torch.from_numpy(clip).permute(0, 3, 1, 2), size, window)
    return np.ascontiguousarray(frames.permute(0, 2, 3, 1).numpy())


def roi_feeds(window: np.ndarray, hw: tuple[int, int], size) -> dict[str, np.ndarray]:
    """One clip's graph crop inputs: its window as float32 (2,) "crop_start" / "crop_end"
    (y, x) in pixels of its `hw` (height, width) source frames, for output `size`."""
    start, end = source_roi(np.asarray(window)[None], [hw[0]], [hw[1]], size)
    return {"crop_start": start[0], "crop_end": end[0]}


def crop_feeds(samples: list[dict], crop: bool, repeats=None) -> dict[str, np.ndarray]:
    """The batch's "crop_start" / "crop_end" (n, 2) float32 from its samples' `roi_feeds`
    (each repeated `repeats[i]` times, for per-frame graphs); none without `crop`."""
    if not crop:
        return {}
    out = {name: np.stack([s[name] for s in samples]).astype(np.float32)
           for name in CROP_FEEDS}
    if repeats is not None:
        out = {name: np.repeat(v, repeats, axis=0) for name, v in out.items()}
    return out


def decode_scaled(decode_clip, size: tuple[int, int] | None,
                  window: np.ndarray | None = None) -> np.ndarray:
    """A clip whose frames leave the decoder scaled (the `scaled_decode` option): to `size`,
    or to the window's resized shape and then cut to `size` at its (top, left), the same
    geometry as `resize_crop`; the scaling is swscale's bilinear filter instead of
    torchvision's antialiased one (agreement measured in docs/measurements.md).

    Args:
        decode_clip: called with `scale=(height, width) | None`, returns (T, H, W, 3) uint8
            (a source's `read` of a `DecodedClipRead` with its index and frames bound).
        size: output (height, width), or None for native resolution.
        window: the clip's crop window (see `resize_crop`), or None.

    Returns:
        (T, size[0], size[1], 3) uint8, C-contiguous.
    """
    if size is None:
        return decode_clip(scale=None)
    shape = tuple(size) if window is None else (int(window[0]), int(window[1]))
    clip = decode_clip(scale=(int(shape[0]), int(shape[1])))
    if window is None:
        return clip
    top, left = int(window[2]), int(window[3])
    return np.ascontiguousarray(clip[:, top:top + int(size[0]), left:left + int(size[1])])
