"""Detection geometry as pure numpy functions of (seed, epoch, key), image sizes and boxes.

Every sample's geometry is five numbers and a flag, the same on both backends:
  window  (top, left, height, width)  the region of the file that is decoded
  resized (height, width)             the window is resized to this (bilinear, antialiased)
  offset  (y, x)                      the output is resized[y:y+H, x:x+W] of the flipped
                                      resized window, zero-padded where it runs out
  flip                                horizontal flip of the resized window
on an output canvas (H, W) shared by the batch. Boxes, masks and pixels all follow it:
boxes are mapped once here in float64 (`map_targets`) and fed to both backends; masks are
resampled nearest-neighbour here (`resample_masks`), so both backends return equal masks.

Modes (`detection_geometry`):
  eval   the whole image, scaled keeping its aspect ratio so that it fits the canvas
         (fit="longer") or so that its shorter side is `size` with the longer side at most
         `max_size` (fit="shorter", canvas max_size x max_size); padded bottom / right.
  train  a random resized crop window (`dali_pipes.geometry.draws.random_resized_crop`) resized to
         the canvas, with box-aware rejection when `min_iou` is set: up to `attempts`
         windows are drawn and the first whose IoU with some box reaches `min_iou` wins
         (none: the whole image); then a horizontal flip.
  train with scale_jitter=(lo, hi)  large-scale jitter: the whole image scaled by
         r * (the eval "longer" scale), r uniform in [lo, hi], then a random canvas-sized
         crop of it (or padding where it is smaller), then the flip.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dali_pipes.geometry.draws import _MASK, flips, random_resized_crop, uniforms

STREAM_JITTER = 11  # large-scale jitter: factor and crop offset
_ATTEMPT_SEED = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class Geometry:
    """A batch's geometry: window int64 (B, 4), resized int64 (B, 2), offset int64 (B, 2),
    flip bool (B,), canvas (H, W)."""

    window: np.ndarray
    resized: np.ndarray
    offset: np.ndarray
    flip: np.ndarray
    canvas: tuple[int, int]

    def row(self, i: int) -> Geometry:
        """Sample i's geometry as a batch of one."""
        s = slice(i, i + 1)
        return Geometry(self.window[s], self.resized[s], self.offset[s], self.flip[s],
                        self.canvas)

    def content(self) -> np.ndarray:
        """int64 (B, 2): rows and columns of the canvas that hold image pixels."""
        h, w = self.canvas
        return np.minimum(self.resized - self.offset, [h, w]).astype(np.int64)


def eval_geometry(heights, widths, canvas: tuple[int, int], *, fit: str = "longer",
                  size: int | None = None, max_size: int | None = None) -> Geometry:
    """The whole image scaled keeping its aspect ratio, at the canvas's top left.

    Args:
        heights, widths: (B,) file sizes.
        canvas: the output (H, W).
        fit: "longer" (the image fits the canvas) or "shorter" (shorter side `size`,
            longer side at most `max_size`).
        size, max_size: for fit="shorter".
    """
    h = np.asarray(heights, np.float64)
    w = np.asarray(widths, np.float64)
    if fit == "shorter":
        if size is None or max_size is None:
            raise ValueError("fit='shorter' needs size and max_size")
        scale = np.minimum(size / np.minimum(h, w), max_size / np.maximum(h, w))
    else:
        scale = np.minimum(canvas[0] / h, canvas[1] / w)
    resized = _scaled(h, w, scale, canvas)
    n = len(h)
    return Geometry(_full(h, w), resized, np.zeros((n, 2), np.int64), np.zeros(n, bool),
                    canvas)


def _scaled(h, w, scale, cap=None) -> np.ndarray:
    rh = np.maximum(np.round(h * scale), 1)
    rw = np.maximum(np.round(w * scale), 1)
    if cap is not None:
        rh, rw = np.minimum(rh, cap[0]), np.minimum(rw, cap[1])
    return np.stack([rh, rw], axis=1).astype(np.int64)


def _full(h, w) -> np.ndarray:
    zeros = np.zeros_like(h)
    return np.stack([zeros, zeros, h, w], axis=1).astype(np.int64)


def box_iou(window: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of windows (K, 4) as top, left, height, width with boxes (N, 4) x1, y1, x2, y2:
    float64 (K, N)."""
    wy1, wx1 = window[:, 0:1], window[:, 1:2]
    wy2, wx2 = wy1 + window[:, 2:3], wx1 + window[:, 3:4]
    ix = np.clip(np.minimum(wx2, boxes[None, :, 2]) - np.maximum(wx1, boxes[None, :, 0]), 0,
                 None)
    iy = np.clip(np.minimum(wy2, boxes[None, :, 3]) - np.maximum(wy1, boxes[None, :, 1]), 0,
                 None)
    inter = ix * iy
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = window[:, 2:3] * window[:, 3:4] + areas[None, :] - inter
    return inter / np.maximum(union, 1e-12)


def crop_windows(seed: int, epoch: int, keys, heights, widths, boxes: list[np.ndarray], *,
                 scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), min_iou: float | None = None,
                 attempts: int = 10) -> np.ndarray:
    """(B, 4) int64 crop windows (top, left, height, width), box-aware when `min_iou` is set.

    Attempt 0 is exactly the image modality's window for (seed, epoch, key); attempt j
    draws from the seed seed ^ (j * golden ratio constant). A sample without boxes takes
    attempt 0; one whose attempts all fail takes the whole image."""
    keys = np.asarray(keys, np.int64)
    first = random_resized_crop(seed, epoch, keys, heights, widths, scale=scale, ratio=ratio)
    if min_iou is None:
        return first
    tries = [first] + [random_resized_crop((seed ^ (j * _ATTEMPT_SEED)) & _MASK, epoch, keys,
                                           heights, widths, scale=scale, ratio=ratio)
                       for j in range(1, attempts)]
    stacked = np.stack(tries, axis=1)  # (B, attempts, 4)
    out = first.copy()
    for i, sample_boxes in enumerate(boxes):
        if len(sample_boxes) == 0:
            continue
        ok = box_iou(stacked[i].astype(np.float64), sample_boxes).max(axis=1) >= min_iou
        out[i] = stacked[i, int(np.argmax(ok))] if ok.any() else \
            [0, 0, int(heights[i]), int(widths[i])]
    return out


@dataclass(frozen=True)
class DetectionCrop:
    """The training crop's options (make_loader's detection group `crop=`, validated by
    `dali_pipes.geometry.detection_options.detection_options`): the random resized crop's area
    `scale` and aspect `ratio` ranges; `min_iou` None, or box-aware crops (the first of
    `crop_attempts` windows whose IoU with some box reaches it, else the whole image); the
    flip probability `hflip`; `scale_jitter` None, or (low, high): large-scale jitter
    instead of the crop."""

    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    min_iou: float | None = None
    crop_attempts: int = 10
    hflip: float = 0.5
    scale_jitter: tuple[float, float] | None = None


def train_geometry(seed: int, epoch: int, keys, heights, widths, boxes: list[np.ndarray],
                   canvas: tuple[int, int], crop: DetectionCrop) -> Geometry:
    """Training geometry (see the module docstring) for a batch of plan keys, under the
    validated crop options `crop`."""
    keys = np.asarray(keys, np.int64)
    h = np.asarray(heights, np.float64)
    w = np.asarray(widths, np.float64)
    flip = flips(seed, epoch, keys, crop.hflip)
    n = len(keys)
    if crop.scale_jitter is None:
        window = crop_windows(seed, epoch, keys, heights, widths, boxes, scale=crop.scale,
                              ratio=crop.ratio, min_iou=crop.min_iou,
                              attempts=crop.crop_attempts)
        resized = np.tile(np.asarray(canvas, np.int64), (n, 1))
        return Geometry(window, resized, np.zeros((n, 2), np.int64), flip, canvas)
    u = uniforms(seed, epoch, keys, STREAM_JITTER, 3)
    lo, hi = crop.scale_jitter
    factor = (lo + u[:, 0] * (hi - lo)) * np.minimum(canvas[0] / h, canvas[1] / w)
    resized = _scaled(h, w, factor)
    spare = np.maximum(resized - np.asarray(canvas, np.int64), 0)
    offset = np.floor(u[:, 1:] * (spare + 1)).astype(np.int64)
    return Geometry(_full(h, w), resized, offset, flip, canvas)


def map_boxes(boxes: np.ndarray, geometry: Geometry, *, min_box_size: float = 1.0
              ) -> tuple[np.ndarray, np.ndarray]:
    """One sample's boxes (N, 4) x1, y1, x2, y2 in file pixels -> output pixels.

    Args:
        boxes: float64 boxes of the file.
        geometry: the sample's geometry (a batch of one, `Geometry.row`).
        min_box_size: boxes narrower or lower than this (in output pixels) after clipping
            to the image content are dropped.

    Returns:
        (float32 (M, 4) kept boxes, bool (N,) which were kept).
    """
    top, left, wh, ww = (float(v) for v in geometry.window[0])
    rh, rw = (float(v) for v in geometry.resized[0])
    oy, ox = (float(v) for v in geometry.offset[0])
    ch, cw = (float(v) for v in geometry.content()[0])
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    x1, x2 = (b[:, 0] - left) * (rw / ww), (b[:, 2] - left) * (rw / ww)
    y1, y2 = (b[:, 1] - top) * (rh / wh), (b[:, 3] - top) * (rh / wh)
    if geometry.flip[0]:
        x1, x2 = rw - x2, rw - x1
    x1, x2 = np.clip(x1 - ox, 0, cw), np.clip(x2 - ox, 0, cw)
    y1, y2 = np.clip(y1 - oy, 0, ch), np.clip(y2 - oy, 0, ch)
    keep = ((x2 - x1) >= min_box_size) & ((y2 - y1) >= min_box_size)
    out = np.stack([x1, y1, x2, y2], axis=1)[keep].astype(np.float32)
    return out.reshape(-1, 4), keep


def unmap_boxes(boxes: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Output boxes back to file pixels: the inverse of `map_boxes` for unclipped boxes
    (eval geometry: what an evaluation does with predictions, using orig_size)."""
    top, left, wh, ww = (float(v) for v in geometry.window[0])
    rh, rw = (float(v) for v in geometry.resized[0])
    oy, ox = (float(v) for v in geometry.offset[0])
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    x1, x2 = b[:, 0] + ox, b[:, 2] + ox
    if geometry.flip[0]:
        x1, x2 = rw - x2, rw - x1
    return np.stack([x1 * ww / rw + left, (b[:, 1] + oy) * wh / rh + top,
                     x2 * ww / rw + left, (b[:, 3] + oy) * wh / rh + top], axis=1)


def resample_masks(masks: np.ndarray, geometry: Geometry) -> np.ndarray:
    """(N, h0, w0) file-size masks -> (N, H, W) uint8 on the canvas, nearest neighbour,
    through the same window, resize, flip, offset and padding as the pixels: a take of
    rows, then of columns (separable, instead of one 2-D gather). Both
    backends call it, so their masks are equal."""
    top, left, wh, ww = (int(v) for v in geometry.window[0])
    rh, rw = (int(v) for v in geometry.resized[0])
    oy, ox = (int(v) for v in geometry.offset[0])
    H, W = geometry.canvas
    ys, cols = np.arange(H) + oy, np.arange(W) + ox
    xs = rw - 1 - cols if geometry.flip[0] else cols
    src_y = top + np.minimum(np.floor((ys + 0.5) * wh / rh).astype(np.int64), wh - 1)
    src_x = left + np.minimum(np.floor((xs + 0.5) * ww / rw).astype(np.int64), ww - 1)
    inside_y, inside_x = ys < rh, cols < rw  # beyond: padding
    rows = np.take(masks, np.where(inside_y, src_y, 0), axis=1)
    out = np.take(rows, np.where(inside_x, src_x, 0), axis=2)
    out[:, ~inside_y] = 0
    out[:, :, ~inside_x] = 0
    return np.ascontiguousarray(out, dtype=np.uint8)


def semantic_map(masks: np.ndarray, labels: np.ndarray, geometry: Geometry) -> np.ndarray:
    """(H, W) uint8 on the canvas from resampled masks (N, H, W) and their labels (N,):
    label + 1 of the last annotation covering each pixel, 0 for none, 255 outside the
    image content (padding)."""
    h, w = geometry.canvas
    n = len(labels)
    order = np.arange(1, n + 1, dtype=np.int32)[:, None, None]
    top = (masks.astype(np.int32) * order).max(axis=0) if n else np.zeros((h, w), np.int64)
    values = np.concatenate([[0], np.asarray(labels, np.int64) + 1]).astype(np.uint8)
    out = values[top]
    ch, cw = (int(v) for v in geometry.content()[0])
    out[ch:, :] = 255
    out[:, cw:] = 255
    return out
