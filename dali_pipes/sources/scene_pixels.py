"""Which pixels of a hyperspectral scene are samples (patch centres), numpy only.

`labels="map"` (the default): every labelled pixel of the scene's label map
(`<scene>.labels.npy`, 0 meaning unlabelled), in row-major order, with the label map's
value minus 1 as its label.

`labels=None`, for scenes that come without label maps (third-party ENVI data never ships
one): the centres of a grid of patches that tiles the scene, label -1. Along each axis of n
pixels the centres are r, r + P, r + 2P, ... (P the patch size, r = P // 2), one per
started tile, the last one moved back to the last pixel where the tiles do not fit
exactly, so the patches cover every pixel and each centre lies in the scene. Row-major
order. The grid depends on the scene's size and P only; which patch comes when, and its
flips and turns, stay the plan's: pure functions of (seed, epoch, key).
"""
from __future__ import annotations

import numpy as np

LABEL_MODES = ("map", None)
UNLABELLED = -1  # the label of a grid patch


def check_labels(labels) -> str | None:
    """`labels` when it is "map" or None; ValueError naming the option otherwise."""
    if labels not in LABEL_MODES or isinstance(labels, bool):
        raise ValueError(f"labels={labels!r}: expected 'map' (patches around the labelled "
                         f"pixels of each <scene>.labels.npy) or None (no label maps: "
                         f"patches on a grid, label {UNLABELLED})")
    return labels


def labelled_pixels(label_map: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lines, samples, labels) int64 of the labelled pixels of a label map, row-major;
    labels are the map's values minus 1."""
    ys, xs = np.nonzero(label_map)
    return (ys.astype(np.int64), xs.astype(np.int64),
            label_map[ys, xs].astype(np.int64) - 1)


def grid_centres(n: int, patch_size: int) -> np.ndarray:
    """int64 centres of the tiles of `patch_size` pixels along an axis of `n` pixels (the
    last moved back to pixel n - 1 when the tiles overhang)."""
    r = patch_size // 2
    return np.minimum(np.arange(r, n + r, patch_size, dtype=np.int64), n - 1)


def grid_pixels(lines: int, samples: int, patch_size: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lines, samples, labels) int64 of a scene's grid of patch centres, row-major, every
    label UNLABELLED."""
    ys, xs = np.meshgrid(grid_centres(lines, patch_size), grid_centres(samples, patch_size),
                         indexing="ij")
    return ys.ravel(), xs.ravel(), np.full(ys.size, UNLABELLED, np.int64)
