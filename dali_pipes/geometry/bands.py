"""Band selection for hyperspectral cubes (numpy only).

``select_bands`` picks K representative bands from a random sample of pixels:

* ``"pca"``: standardise the bands, take the principal components in order of explained
  variance and, for the i-th pick, the not-yet-chosen band with the largest absolute loading on
  component ``i`` (cycling when K exceeds the number of components): one band per leading
  direction of variation rather than K neighbours of the strongest one.
* ``"mi"``: mutual information between each band (quantised into equal-frequency bins) and the
  labels, over labeled pixels only (label 0 means unlabeled); the K highest scores win.

Both are deterministic for a given ``seed``; ties go to the lower band index. The result is a
sorted list usable as ``bands=`` for ``read_patch``.

Band math on big samples (the PCA covariance and eigen-decomposition, per-band statistics of a
scene) runs on the array module ``array_module(device)`` picks: numpy, or CuPy when ``device``
names a CUDA device, CuPy imports and a GPU is present. CuPy is imported only then, never on
a CPU path; results equal numpy's to float tolerance.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Literal, TypeVar

import numpy as np

from dali_pipes.formats.cube import Cube

_T = TypeVar("_T")


def _cuda_index(device) -> int | None:
    """None for "cpu"; the device number for "cuda" (0) or "cuda:N"; ValueError otherwise."""
    text = str(device)
    if text == "cpu":
        return None
    head, sep, number = text.partition(":")
    if head != "cuda" or (sep and not number.isdigit()):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return int(number or 0)


def array_module(device: str = "cpu") -> ModuleType:
    """numpy, or cupy when ``device`` ("cuda", "cuda:N" or a torch.device) names a CUDA device
    and CuPy passes `dali_pipes.gpu.cupy_check.cupy_problem` there (proved once per device)."""
    from dali_pipes.gpu.cupy_check import cupy_problem

    index = _cuda_index(device)
    if index is None or cupy_problem(index) is not None:
        return np
    import cupy
    return cupy


def _run(device: str, work: Callable[[ModuleType], _T]) -> _T:
    """``work(xp)`` with ``xp = array_module(device)``; on CuPy, on that device, and the GPU
    memory its arrays cached in CuPy's pool is handed back afterwards (torch and DALI share
    the GPU). ``work`` returns numpy results."""
    xp = array_module(device)
    if xp is np:
        return work(np)
    with xp.cuda.Device(_cuda_index(device)):
        try:
            return work(xp)
        finally:  # work's arrays are gone by now: their blocks can be released
            xp.get_default_memory_pool().free_all_blocks()


def _to_numpy(array) -> np.ndarray:
    return array if isinstance(array, np.ndarray) else array.get()  # cupy: to the host


def band_statistics(values: np.ndarray, *, device: str = "cpu"
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per-band (mean, std) float32 of ``values`` (bands, n), NaNs ignored; an unknown mean
    becomes 0 and a zero or unknown std 1. On ``array_module(device)``."""
    return _run(device, lambda xp: _band_statistics(xp, values))


def _band_statistics(xp: ModuleType, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN bands: handled below
        data = xp.asarray(values, dtype=xp.float64)
        mean, std = xp.nanmean(data, axis=1), xp.nanstd(data, axis=1)
    mean = xp.where(xp.isfinite(mean), mean, 0.0)
    std = xp.where(xp.isfinite(std) & (std > 0), std, 1.0)
    return _to_numpy(mean).astype(np.float32), _to_numpy(std).astype(np.float32)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _sample_positions(candidates: np.ndarray, n_pixels: int, seed: int) -> np.ndarray:
    """Flat pixel indices: up to ``n_pixels`` of ``candidates``, without replacement, sorted."""
    rng = np.random.default_rng(seed)
    if candidates.size > n_pixels:
        candidates = rng.choice(candidates, size=n_pixels, replace=False)
    return np.sort(candidates)


def _gather(source, positions: np.ndarray, samples: int) -> np.ndarray:
    """(n, bands) values at flat ``positions``; a cube is read one needed row at a time."""
    ys, xs = np.divmod(positions, samples)
    if isinstance(source, np.ndarray):
        return source[:, ys, xs].T
    rows = []
    for y in np.unique(ys):  # a loop over image rows, not pixels
        row = source.read_window(int(y), 0, 1, samples)[:, 0, :]
        rows.append(row[:, xs[ys == y]].T)
    return np.concatenate(rows, axis=0)


def _as_float(values: np.ndarray) -> np.ndarray:
    return np.abs(values) if np.iscomplexobj(values) else values.astype(np.float64)


def principal_axes(values: np.ndarray, *, device: str = "cpu"
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues, eigenvectors as columns) of the covariance of the standardised columns
    of ``values`` (n, bands): the correlation matrix times n / (n - 1). Largest first,
    computed on ``array_module(device)``, returned as numpy arrays."""
    eigenvalues, vectors = _run(device, lambda xp: _eigh_standardised(xp, values))
    order = np.argsort(eigenvalues, kind="stable")[::-1]
    return eigenvalues[order], vectors[:, order]


def _eigh_standardised(xp: ModuleType, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    data = xp.asarray(values, dtype=xp.float64)
    centred = data - data.mean(axis=0)
    scale = centred.std(axis=0)
    centred /= xp.where(scale > 0, scale, 1.0)
    covariance = centred.T @ centred / max(len(centred) - 1, 1)
    eigenvalues, vectors = xp.linalg.eigh(covariance)
    return _to_numpy(eigenvalues), _to_numpy(vectors)


def _pca_pick(values: np.ndarray, k: int, device: str) -> list[int]:
    loadings = np.abs(principal_axes(values, device=device)[1])
    chosen: list[int] = []
    for i in range(k):
        scores = loadings[:, i % loadings.shape[1]].copy()
        scores[chosen] = -1.0
        chosen.append(int(np.argmax(scores)))
    return chosen


def _quantise(column: np.ndarray, bins: int) -> np.ndarray:
    edges = np.unique(np.quantile(column, np.linspace(0.0, 1.0, bins + 1)[1:-1]))
    return np.searchsorted(edges, column, side="right")


def mutual_information(values: np.ndarray, labels: np.ndarray, *, bins: int = 16) -> np.ndarray:
    """MI (nats) between each column of ``values`` (n, bands), quantised, and ``labels`` (n,)."""
    _, label_ids = np.unique(labels, return_inverse=True)
    n_labels = int(label_ids.max()) + 1
    p_label = np.bincount(label_ids, minlength=n_labels) / len(label_ids)
    scores = np.empty(values.shape[1])
    for band in range(values.shape[1]):  # a loop over bands, vectorised over pixels
        q = _quantise(values[:, band], bins)
        counts = np.bincount(q * n_labels + label_ids, minlength=(bins + 1) * n_labels)
        joint = counts.reshape(bins + 1, n_labels) / len(label_ids)
        outer = joint.sum(axis=1, keepdims=True) * p_label[None, :]
        nz = joint > 0
        scores[band] = float(np.sum(joint[nz] * np.log(joint[nz] / outer[nz])))
    return scores


def _mi_pick(values: np.ndarray, labels: np.ndarray, k: int) -> list[int]:
    scores = mutual_information(values, labels)
    order = np.lexsort((np.arange(len(scores)), -np.round(scores, 12)))
    return [int(b) for b in order[:k]]


def _check_source(source) -> tuple[int, int, int]:
    if isinstance(source, np.ndarray):
        if source.ndim != 3:
            raise ValueError(f"an array must be (bands, lines, samples), got shape {source.shape}")
        return source.shape
    if not isinstance(source, Cube):
        raise TypeError("cube_or_array must be a (bands, lines, samples) array or a Cube "
                        "(dali_pipes.formats.cube: .geometry and .read_window, as ENVI cubes "
                        f"and SPE files have), got {type(source).__name__}")
    bands, lines, samples = source.geometry
    return int(bands), int(lines), int(samples)


def select_bands(cube_or_array: Cube | np.ndarray, k: int, *,
                 method: Literal["pca", "mi"] = "pca", labels: np.ndarray | None = None,
                 n_pixels: int = 4096, seed: int = 0, device: str = "cpu") -> list[int]:
    """K distinct band indices (sorted) chosen on a random sample of ``n_pixels`` pixels;
    ``device`` ("cpu", "cuda", "cuda:N") picks where the PCA's band math runs."""
    n_bands, lines, samples = _check_source(cube_or_array)
    _cuda_index(device)  # a bad device fails before any read
    k = _positive_int("k", k)
    if k > n_bands:
        raise ValueError(f"k={k} exceeds the number of bands ({n_bands})")
    if method not in ("pca", "mi"):
        raise ValueError(f"method must be 'pca' or 'mi', got {method!r}")
    candidates = np.arange(lines * samples)
    if method == "mi":
        if labels is None:
            raise ValueError("method='mi' needs labels (lines, samples); 0 means unlabeled")
        labels = np.asarray(labels)
        if labels.shape != (lines, samples):
            raise ValueError(f"labels shape {labels.shape} != (lines, samples) {(lines, samples)}")
        candidates = np.flatnonzero(labels.reshape(-1) != 0)
        if candidates.size == 0:
            raise ValueError("labels has no labeled (non-zero) pixel")
    positions = _sample_positions(candidates, _positive_int("n_pixels", n_pixels), seed)
    values = _as_float(_gather(cube_or_array, positions, samples))
    finite = np.all(np.isfinite(values), axis=1)
    values, positions = values[finite], positions[finite]
    if len(values) < 2:
        raise ValueError("fewer than 2 sampled pixels have finite values in every band")
    if method == "pca":
        return sorted(_pca_pick(values, k, device))
    return sorted(_mi_pick(values, np.asarray(labels).reshape(-1)[positions], k))


def bands_in_range(wavelengths, low_nm: float, high_nm: float) -> list[int]:
    """Indices of the bands whose wavelength lies in ``[low_nm, high_nm]`` (inclusive), in
    order of increasing wavelength (ties: lower index first), whatever order the file lists
    its bands in, so every scene gives its channels in the same spectral order."""
    if wavelengths is None:
        raise ValueError("the cube has no wavelengths, so a wavelength range cannot be used")
    wl = np.asarray(wavelengths, dtype=np.float64).reshape(-1)
    if not np.isfinite(low_nm) or not np.isfinite(high_nm) or low_nm > high_nm:
        raise ValueError(f"need finite low_nm <= high_nm, got ({low_nm}, {high_nm})")
    found = np.flatnonzero((wl >= low_nm) & (wl <= high_nm))
    if found.size == 0:
        span = f"{np.nanmin(wl):g}..{np.nanmax(wl):g} nm" if wl.size else "no bands"
        raise ValueError(f"no band has a wavelength in [{low_nm:g}, {high_nm:g}] nm "
                         f"(the cube covers {span})")
    return [int(i) for i in found[np.argsort(wl[found], kind="stable")]]


__all__ = ["array_module", "band_statistics", "bands_in_range", "mutual_information",
           "principal_axes", "select_bands"]
