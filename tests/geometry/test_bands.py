"""Band selection: PCA and mutual information on synthetic cubes, wavelength ranges."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dali_pipes.geometry.bands import (
    array_module,
    band_statistics,
    bands_in_range,
    mutual_information,
    principal_axes,
    select_bands,
)

B, H, W = 12, 20, 24


def _cube(seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, H, W)).astype(np.float32)


def _labelled_cube(informative: int = 7):
    """A cube where only band ``informative`` depends on the label (1 or 2; 0 = unlabeled)."""
    rng = np.random.default_rng(1)
    labels = rng.integers(1, 3, size=(H, W))
    labels[:2] = 0
    cube = rng.normal(size=(B, H, W))
    cube[informative] += 4.0 * labels
    return cube, labels


class _FakeCube:
    """The Cube protocol (dali_pipes.formats.cube) over an array, counting reads."""

    def __init__(self, array):
        self.array, self.geometry, self.reads = array, array.shape, 0
        self.path, self.dtype, self.wavelengths = "<fake>", array.dtype, None
        self.files = ("<fake>",)

    def close(self):
        pass

    def read_window(self, y, x, h, w, bands=None):
        self.reads += 1
        sel = slice(None) if bands is None else list(bands)
        return self.array[sel, y:y + h, x:x + w].copy()


@pytest.mark.parametrize("k", [1, 3, B])
def test_pca_distinct_valid_deterministic(k):
    cube = _cube()
    picked = select_bands(cube, k, n_pixels=200, seed=4)
    assert len(picked) == k == len(set(picked)) and picked == sorted(picked)
    assert all(0 <= b < B for b in picked) and all(type(b) is int for b in picked)
    assert picked == select_bands(cube, k, n_pixels=200, seed=4)


def test_pca_spreads_over_directions():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, H, W))
    # bands 0-5 are copies of signal a (plus a little noise), 6-11 of an independent signal b
    cube = np.concatenate([a + 0.01 * rng.normal(size=(6, H, W)),
                           b + 0.01 * rng.normal(size=(6, H, W))])
    picked = select_bands(cube, 2)
    assert min(picked) < 6 <= max(picked)  # one band per group, not two near-copies


def test_mi_prefers_informative_band():
    cube, labels = _labelled_cube(informative=7)
    picked = select_bands(cube, 1, method="mi", labels=labels)
    assert picked == [7]
    three = select_bands(cube, 3, method="mi", labels=labels, seed=5)
    assert 7 in three and len(set(three)) == 3
    assert three == select_bands(cube, 3, method="mi", labels=labels, seed=5)


def test_mutual_information_scores():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=500)
    values = np.stack([labels + 0.01 * rng.normal(size=500), rng.normal(size=500)], axis=1)
    scores = mutual_information(values, labels)
    assert scores[0] == pytest.approx(np.log(3), rel=0.05) and scores[1] < 0.1


def test_cube_object_is_read_by_rows():
    cube, labels = _labelled_cube()
    fake = _FakeCube(cube)
    assert select_bands(fake, 2, method="mi", labels=labels) == \
        select_bands(cube, 2, method="mi", labels=labels)
    assert fake.reads <= H


def test_with_envi_cube(tmp_path):
    envi = pytest.importorskip("spectral.io.envi")
    from dali_pipes.formats import open_envi
    array = _cube()
    envi.save_image(str(tmp_path / "c.hdr"), array.transpose(1, 2, 0), interleave="bil")
    with open_envi(tmp_path / "c.hdr") as cube:
        picked = select_bands(cube, 4, n_pixels=100)
        assert picked == select_bands(array, 4, n_pixels=100)
        assert cube.read_window(0, 0, 2, 2, bands=picked).shape == (4, 2, 2)


def test_non_finite_pixels_are_ignored():
    cube = _cube()
    cube[:, 0, :] = np.nan
    assert len(select_bands(cube, 3)) == 3


@pytest.mark.parametrize("kwargs,match", [
    ({"k": 0}, "k must"), ({"k": B + 1}, "exceeds"), ({"k": 2, "method": "lda"}, "method"),
    ({"k": 2, "method": "mi"}, "needs labels"), ({"k": 2, "n_pixels": 0}, "n_pixels"),
    ({"k": 2, "method": "mi", "labels": np.ones((H, W + 1))}, "labels shape"),
    ({"k": 2, "method": "mi", "labels": np.zeros((H, W))}, "no labeled"),
])
def test_select_bands_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        select_bands(_cube(), **kwargs)


def test_select_bands_rejects_other_inputs():
    with pytest.raises(ValueError, match="bands, lines, samples"):
        select_bands(np.zeros((3, 4)), 1)
    with pytest.raises(TypeError, match="cube_or_array"):
        select_bands([[1.0]], 1)


def test_bands_in_range():
    wavelengths = np.array([400.0, 450.0, 500.0, 550.0, 600.0])
    assert bands_in_range(wavelengths, 450, 550) == [1, 2, 3]
    assert bands_in_range(list(wavelengths), 0, 1000) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="no band .* covers 400..600"):
        bands_in_range(wavelengths, 610, 700)
    with pytest.raises(ValueError, match="no wavelengths"):
        bands_in_range(None, 400, 500)
    with pytest.raises(ValueError, match="low_nm <= high_nm"):
        bands_in_range(wavelengths, 500, 400)


def _low_rank_cube(bands: int, lines: int, samples: int, seed: int = 0) -> np.ndarray:
    """Five spatial signals of clearly different strengths mixed into every band, plus noise:
    a PCA whose leading directions are well separated (so picks cannot flip on rounding)."""
    rng = np.random.default_rng(seed)
    signals = rng.normal(size=(5, lines * samples)) * np.array([[8.0], [5.0], [3.0], [2.0],
                                                                [1.0]])
    mixing = rng.normal(size=(bands, 5))
    cube = mixing @ signals + 0.1 * rng.normal(size=(bands, lines * samples))
    return cube.reshape(bands, lines, samples)


def test_array_module_is_numpy_on_the_cpu_and_checks_the_device():
    assert array_module("cpu") is np and array_module() is np
    for bad in ("gpu", "cuda:x", "cuda:", "tpu:0", ""):
        with pytest.raises(ValueError, match="device must be"):
            array_module(bad)
    with pytest.raises(ValueError, match="device must be"):
        select_bands(_cube(), 2, device="gpu")


def test_cupy_is_not_imported_on_cpu_paths():
    code = ("import sys, numpy as np; from dali_pipes.geometry import bands; "
            "from dali_pipes.sources import hyperspectral; "
            "cube = np.random.default_rng(0).normal(size=(6, 8, 9)); "
            "bands.select_bands(cube, 2); bands.band_statistics(cube.reshape(6, -1)); "
            "assert 'cupy' not in sys.modules, 'cupy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_band_statistics_ignore_nans_and_fix_flat_bands():
    rng = np.random.default_rng(3)
    values = rng.normal(5.0, 2.0, size=(4, 300)).astype(np.float32)
    values[1, ::3] = np.nan
    values[2] = 7.0  # a constant band: std 0 becomes 1
    values[3] = np.nan  # nothing known: mean 0, std 1
    mean, std = band_statistics(values)
    assert mean.dtype == std.dtype == np.float32
    finite = values[1][np.isfinite(values[1])].astype(np.float64)
    np.testing.assert_allclose(mean, [values[0].astype(np.float64).mean(), finite.mean(), 7, 0],
                               rtol=1e-6)
    np.testing.assert_allclose(std, [values[0].astype(np.float64).std(), finite.std(), 1, 1],
                               rtol=1e-6)


def test_principal_axes_diagonalise_the_correlation_matrix():
    values = _low_rank_cube(10, 30, 40).reshape(10, -1).T
    eigenvalues, vectors = principal_axes(values)
    assert np.all(np.diff(eigenvalues) <= 0)  # largest first
    n = len(values)  # standardised with the population std, covariance over n - 1
    correlation = np.corrcoef(values, rowvar=False) * n / (n - 1)
    np.testing.assert_allclose(vectors @ np.diag(eigenvalues) @ vectors.T, correlation,
                               atol=1e-10)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(10), atol=1e-10)


def test_cuda_request_gives_the_cpu_results():
    """On a machine without a usable GPU "cuda" falls back to numpy; with one it runs on CuPy.
    Either way the numbers agree with the CPU path to float tolerance."""
    cube = _low_rank_cube(16, 40, 50, seed=1)
    values = cube.reshape(16, -1)
    for got, want in zip(band_statistics(values, device="cuda"), band_statistics(values),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert select_bands(cube, 4, device="cuda") == select_bands(cube, 4)


@pytest.mark.gpu
def test_gpu_band_math_matches_numpy_on_a_big_cube():
    cupy = pytest.importorskip("cupy")
    assert array_module("cuda") is cupy and array_module("cuda:0") is cupy
    cube = _low_rank_cube(128, 256, 256, seed=2)
    values = cube.reshape(128, -1)
    for got, want in zip(band_statistics(values, device="cuda"), band_statistics(values),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    gpu_w, gpu_v = principal_axes(values.T, device="cuda")
    cpu_w, cpu_v = principal_axes(values.T)
    np.testing.assert_allclose(gpu_w, cpu_w, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.abs(gpu_v[:, :5]), np.abs(cpu_v[:, :5]), atol=1e-8)
    assert select_bands(cube, 5, n_pixels=20000, device="cuda") == \
        select_bands(cube, 5, n_pixels=20000)


def test_bands_in_range_follows_wavelength_not_file_order():
    descending = np.array([700.0, 650.0, 600.0, 550.0, 500.0])
    assert bands_in_range(descending, 540, 660) == [3, 2, 1]
    shuffled = np.array([600.0, 500.0, 700.0, 550.0, 500.0])
    assert bands_in_range(shuffled, 0, 1000) == [1, 4, 3, 0, 2]  # ties: lower index first
