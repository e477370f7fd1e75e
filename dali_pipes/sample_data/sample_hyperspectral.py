"""Built-in hyperspectral sample scenes for the benchmarks: deterministic, cached.

Two scenes of the same band count, one ENVI cube (int16, BIL, written with Spectral Python)
and one LightField SPE 3.0 file (uint16, written with our SPE writer), each with a label map.
What the loader cares about is realistic: smooth spectra (a few broad absorption features on
a sloping baseline, one signature per class), spatial structure (class regions with a smooth
illumination field and sensor noise) and label maps where most pixels are unlabeled.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from dali_pipes.sample_data.sample_images import cache_root

WAVELENGTH_RANGE = (400.0, 1000.0)  # nm


def class_spectra(rng: np.random.Generator, wavelengths: np.ndarray, n_classes: int
                  ) -> np.ndarray:
    """(n_classes, bands) smooth reflectance-like spectra in roughly [0.05, 0.9]."""
    span = wavelengths[-1] - wavelengths[0]
    t = (wavelengths - wavelengths[0]) / span
    spectra = []
    for _ in range(n_classes):
        s = rng.uniform(0.2, 0.5) + rng.uniform(-0.2, 0.3) * t
        for _ in range(3):  # broad absorption or reflection features
            centre, width = rng.uniform(0, 1), rng.uniform(0.04, 0.2)
            s = s + rng.uniform(-0.2, 0.25) * np.exp(-0.5 * ((t - centre) / width) ** 2)
        spectra.append(np.clip(s, 0.05, 0.9))
    return np.stack(spectra)


def synthetic_scene(rng: np.random.Generator, lines: int, samples: int, bands: int, *,
                    n_classes: int = 6, labeled_fraction: float = 0.3
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cube (lines, samples, bands) float64 reflectance, labels (lines, samples) int32 with 0
    for unlabeled, wavelengths (bands,) nm)."""
    wavelengths = np.linspace(*WAVELENGTH_RANGE, bands)
    spectra = class_spectra(rng, wavelengths, n_classes)
    n_seeds = 3 * n_classes
    seeds = rng.uniform([0, 0], [lines, samples], size=(n_seeds, 2))
    seed_class = np.arange(n_seeds) % n_classes
    yy, xx = np.mgrid[0:lines, 0:samples]
    dist = np.hypot(yy[..., None] - seeds[:, 0], xx[..., None] - seeds[:, 1])
    nearest = np.argmin(dist, axis=-1)
    region = seed_class[nearest]
    light = 1.0 + 0.15 * np.sin(yy / lines * rng.uniform(2, 6) + rng.uniform(0, 6)) \
        * np.cos(xx / samples * rng.uniform(2, 6) + rng.uniform(0, 6))
    cube = spectra[region] * light[..., None]
    cube += rng.normal(scale=0.005, size=cube.shape)
    # Label the cores of regions only: borders and the rest stay unlabeled, as in field data.
    core = np.take_along_axis(dist, nearest[..., None], axis=-1)[..., 0]
    labeled = core <= np.quantile(core, labeled_fraction)
    labels = np.where(labeled, region + 1, 0).astype(np.int32)
    return cube, labels, wavelengths


def write_scene(folder: Path, name: str, values: np.ndarray, labels: np.ndarray,
                wavelengths: np.ndarray | None, *, kind: str = "envi", interleave: str = "bil",
                byteorder: int = 0) -> Path:
    """Write ``values`` (lines, samples, bands), in its own dtype, as ``folder/name.hdr`` (+
    ``name.img``, with Spectral Python) or ``folder/name.spe`` (SPE 3.0: frames = lines,
    y = samples, x = bands), and ``labels`` as ``name.labels.npy``. Returns the scene file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "envi":
        from spectral.io import envi  # type: ignore[import-untyped]

        path = folder / f"{name}.hdr"
        meta = {} if wavelengths is None else {
            "wavelength": [f"{w:.3f}" for w in wavelengths], "wavelength units": "Nanometers"}
        envi.save_image(str(path), values, dtype=values.dtype, interleave=interleave,
                        byteorder=byteorder, force=True, metadata=meta)
    elif kind == "spe":
        from dali_pipes.formats._spe_writer import write_spe

        path = Path(write_spe(folder / f"{name}.spe", values, version=3.0,
                              wavelengths=None if wavelengths is None else list(wavelengths)))
    else:
        raise ValueError(f"kind must be 'envi' or 'spe', got {kind!r}")
    np.save(folder / f"{name}.labels.npy", labels)
    return Path(path)


def scaled(cube: np.ndarray, dtype: str, scale: float) -> np.ndarray:
    """``cube * scale`` rounded and clipped into an integer ``dtype`` (or cast to a float one)."""
    dt = np.dtype(dtype)
    values = cube * scale
    if dt.kind in "iu":
        info = np.iinfo(dt)
        values = np.clip(np.round(values), info.min, info.max)
    return values.astype(dt)


def hyperspectral_dataset(*, lines: int = 200, samples: int = 200, bands: int = 96,
                          root: Path | None = None, seed: int = 0, progress=None) -> Path:
    """Create (once) and return a folder with one ENVI and one SPE scene plus label maps.

    `progress`, when given, is called with (done, total) as scenes are written. The folder
    name encodes every parameter, so a changed request never reuses stale files.
    """
    key = hashlib.sha1(repr((lines, samples, bands, seed, 1)).encode()).hexdigest()[:10]
    base = (root or cache_root()) / f"hyperspectral-{samples}x{lines}x{bands}-{key}"
    done_marker = base / ".complete"
    if done_marker.exists():
        return base
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, kind in enumerate(("envi", "spe")):
        cube, labels, wavelengths = synthetic_scene(rng, lines, samples, bands)
        # ENVI: reflectance x 10000 as int16; SPE: detector counts as uint16
        values = scaled(cube, *(("int16", 1e4) if kind == "envi" else ("uint16", 3e4)))
        write_scene(base, f"scene_{i:02d}_{kind}", values, labels, wavelengths, kind=kind)
        if progress is not None:
            progress(i + 1, 2)
    done_marker.write_text("ok\n")
    return base


def small_scene_folder(folder: Path, *, lines: int = 20, samples: int = 24, bands: int = 12,
                       seed: int = 0) -> list[dict]:
    """Three small scenes of mixed formats for tests and quick checks, sorted by name:
    ``a`` ENVI int16 BIL little-endian, ``b`` ENVI float32 BSQ big-endian (wavelengths 5 nm
    above the others), ``c`` SPE uint16. Each label map has about half its pixels labeled
    (classes 1..3), corners included. Returns, per scene, what was written: "path", "cube"
    (bands, lines, samples), "labels", "wavelengths"."""
    rng = np.random.default_rng(seed)
    wavelengths = np.linspace(400.0, 950.0, bands)
    specs = (("a", "envi", "int16", 0, "bil", wavelengths),
             ("b", "envi", "float32", 1, "bsq", wavelengths + 5.0),
             ("c", "spe", "uint16", 0, "bil", wavelengths))
    written = []
    for name, kind, dtype, byteorder, interleave, wl in specs:
        values = rng.integers(0, 3000, size=(lines, samples, bands))
        values = (values / 8.0 if dtype == "float32" else values).astype(dtype)
        labels = rng.integers(1, 4, size=(lines, samples)) * (rng.random((lines, samples)) < 0.5)
        labels[[0, 0, -1, -1], [0, -1, 0, -1]] = [1, 2, 3, 1]
        path = write_scene(folder, name, values, labels, wl, kind=kind, interleave=interleave,
                           byteorder=byteorder)
        written.append({"path": path, "cube": values.transpose(2, 0, 1), "labels": labels,
                        "wavelengths": wl})
    return written
