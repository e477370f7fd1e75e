"""Synthetic `.npy` series in class folders: the tiny test data and the built-in sample set.

Each class is a kind of multichannel signal (sines, square waves, sawtooths, noise bursts),
with a random frequency, phase and amplitude per file and channel plus noise, so a model can
learn the classes; lengths vary, so some series are shorter than a window and get padded.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from dali_pipes.sample_data.sample_images import cache_root

KINDS = ("sine", "square", "sawtooth", "bursts")


def synthetic_series(rng: np.random.Generator, kind: int, rows: int, channels: int
                     ) -> np.ndarray:
    """(rows, channels) float64 signal of class `kind` (an index of KINDS), about unit scale."""
    t = np.arange(rows)[:, None]
    freq = rng.uniform(0.02, 0.2, channels)[None, :]
    phase = 2 * np.pi * (t * freq + rng.random(channels)[None, :])
    amplitude = rng.uniform(0.5, 2.0, channels)[None, :]
    if kind == 0:
        wave = np.sin(phase)
    elif kind == 1:
        wave = np.sign(np.sin(phase))
    elif kind == 2:
        wave = 2 * ((phase / (2 * np.pi)) % 1.0) - 1
    else:
        wave = (rng.random((rows, channels)) < 0.1) * rng.normal(0, 2, (rows, channels))
    return amplitude * wave + rng.normal(0, 0.1, (rows, channels))


def write_series_folder(root: Path, *, n_files: int, n_classes: int, channels: int,
                        rows=(3, 8, 13, 20), dtype: str = "float32", scale: float = 1.0,
                        seed: int = 0) -> Path:
    """`root/<kind>/series_i.npy`: file i of class i % n_classes, `rows[i % len(rows)]` rows
    (a sequence) or a random count in `rows` = (low, high) given as a range object.

    Args:
        root: the folder to write (created).
        n_files, n_classes, channels: files in all, class folders, channels per file.
        rows: the row counts in turn (a tuple), or a `range` to draw them from.
        dtype: the files' dtype; values are multiplied by `scale` before the cast.
        seed: the random seed.

    Returns:
        `root`.
    """
    rng = np.random.default_rng(seed)
    for i in range(n_files):
        kind = i % n_classes
        folder = root / KINDS[kind]
        folder.mkdir(parents=True, exist_ok=True)
        count = int(rng.choice(rows)) if isinstance(rows, range) else rows[i % len(rows)]
        values = synthetic_series(rng, kind, count, channels) * scale
        np.save(folder / f"series_{i:04d}.npy", values.astype(dtype))
    return root


def tiny(root: Path, source: int) -> Path:
    """10 (source 0) or 6 (source 1) int16 series of 3 channels in 2 classes, 3 to 20 rows."""
    return write_series_folder(root, n_files=(10, 6)[source], n_classes=2, channels=3,
                               dtype="int16", scale=1000.0, seed=5 + source)


def arrays_dataset(*, n_files: int = 320, channels: int = 8, root: Path | None = None,
                   seed: int = 0, progress=None) -> Path:
    """Create (once) and return class folders of float32 series: 4 classes, 48 to 256 rows.

    `progress`, when given, is called with (done, total) once the files are written. The
    folder name encodes every parameter, so a changed request never reuses stale files.
    """
    key = hashlib.sha1(repr((n_files, channels, seed, 1)).encode()).hexdigest()[:10]
    base = (root or cache_root()) / f"arrays-{n_files}x{channels}-{key}"
    done_marker = base / ".complete"
    if done_marker.exists():
        return base
    write_series_folder(base, n_files=n_files, n_classes=len(KINDS), channels=channels,
                        rows=range(48, 257), seed=seed)
    if progress is not None:
        progress(n_files, n_files)
    done_marker.write_text("ok\n")
    return base
