"""HyperspectralSource: scene listing and validation, sample table, reflect-padded patches."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder, write_scene
from dali_pipes.sources.hyperspectral import HyperspectralSource, patch_augment

pytest.importorskip("spectral")


@pytest.fixture
def scenes(tmp_path):
    return small_scene_folder(tmp_path / "scenes")


def _folder(scenes) -> Path:
    return scenes[0]["path"].parent


def _expected(scene: dict, y: int, x: int, p: int, bands=None) -> np.ndarray:
    """The patch from the written values: pad the whole cube with numpy, then crop."""
    cube = scene["cube"] if bands is None else scene["cube"][bands]
    r = p // 2
    padded = np.pad(cube, ((0, 0), (r, r), (r, r)), mode="reflect")
    return padded[:, y:y + p, x:x + p]


def test_sample_table_is_scenes_in_name_order_then_row_major(scenes):
    src = HyperspectralSource(_folder(scenes))
    assert [Path(s.path).name for s in src.scenes] == ["a.hdr", "b.hdr", "c.spe"]
    assert [s.kind for s in src.scenes] == ["envi", "envi", "spe"]
    for scene_id, scene in enumerate(scenes):
        ys, xs = np.nonzero(scene["labels"])
        mine = src.scene_ids == scene_id
        np.testing.assert_array_equal(src.positions[mine], np.stack([ys, xs], axis=1))
        np.testing.assert_array_equal(src.labels[mine], scene["labels"][ys, xs] - 1)
    assert len(src) == sum(int((s["labels"] != 0).sum()) for s in scenes)
    assert src.n_bands == 12 and src.dtype == np.float32  # int16, float32, uint16 -> float32


@pytest.mark.parametrize("p", [1, 5, 9, 41])  # 41 > 2 * 20 - 1: mirrors more than once
def test_patches_equal_numpy_reflect_padding_everywhere(scenes, p):
    src = HyperspectralSource(_folder(scenes), patch_size=p)
    for index in range(len(src)):
        scene_id = int(src.scene_ids[index])
        y, x = src.positions[index]
        got = src.read(index)
        assert got.shape == (12, p, p) and got.dtype == src.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, _expected(scenes[scene_id], y, x, p))


def test_band_indices_and_wavelength_ranges(scenes):
    src = HyperspectralSource(_folder(scenes), bands=[11, 0, 4])
    index = int(np.flatnonzero(src.scene_ids == 2)[0])  # the SPE scene
    y, x = src.positions[index]
    np.testing.assert_array_equal(src.read(index), _expected(scenes[2], y, x, 9, [11, 0, 4]))
    by_range = HyperspectralSource(_folder(scenes), bands=(480.0, 720.0))
    assert [s.band_indices for s in by_range.scenes] == [[2, 3, 4, 5, 6]] * 3
    np.testing.assert_allclose(by_range.wavelengths(1), [505, 555, 605, 655, 705])
    with pytest.raises(ValueError, match=r"different number of bands.*a.hdr: 5.*b.hdr: 4"):
        HyperspectralSource(_folder(scenes), bands=(500.0, 700.0))


@pytest.mark.parametrize("bands,match", [
    ([0, 12], r"band indices in \[0, 12\).*a.hdr"), ("red", "bands must be"), ([], "bands="),
    ((1200.0, 1300.0), "no band has a wavelength"), ([1.5, 2], "bands=")])
def test_bad_band_options(scenes, bands, match):
    with pytest.raises(ValueError, match=match):
        HyperspectralSource(_folder(scenes), bands=bands)


@pytest.mark.parametrize("p", [0, 4, -3, True, 2.0])
def test_patch_size_must_be_a_positive_odd_int(scenes, p):
    with pytest.raises(ValueError, match="patch_size"):
        HyperspectralSource(_folder(scenes), patch_size=p)


def test_missing_label_map_names_the_scene(scenes):
    (_folder(scenes) / "b.labels.npy").unlink()
    with pytest.raises(FormatError, match="label map") as info:
        HyperspectralSource(_folder(scenes))
    assert info.value.path.endswith("b.hdr") and info.value.field == "label map"


@pytest.mark.parametrize("labels,match", [
    (np.ones((20, 23), np.int32), "shape"), (np.ones((20, 24), np.float32), "integer"),
    (-np.ones((20, 24), np.int8), "negative")])
def test_bad_label_maps(scenes, labels, match):
    np.save(_folder(scenes) / "c.labels.npy", labels)
    with pytest.raises(FormatError, match=match) as info:
        HyperspectralSource(_folder(scenes))
    assert info.value.path.endswith("c.labels.npy")


def test_truncated_cube_fails_on_open(scenes):
    data = _folder(scenes) / "a.img"
    data.write_bytes(data.read_bytes()[:-10])
    with pytest.raises(FormatError, match="a.img: data size"):
        HyperspectralSource(_folder(scenes))


def test_complex_cube_and_empty_folders_are_refused(tmp_path):
    values = np.ones((4, 5, 3), np.complex64)
    write_scene(tmp_path / "c", "z", values, np.ones((4, 5), np.int32), None)
    with pytest.raises(FormatError, match="complex"):
        HyperspectralSource(tmp_path / "c")
    write_scene(tmp_path / "u", "z", np.ones((4, 5, 3), np.int16), np.zeros((4, 5), np.int32),
                None)
    with pytest.raises(ValueError, match="no labeled pixel"):
        HyperspectralSource(tmp_path / "u")
    (tmp_path / "e").mkdir()
    with pytest.raises(ValueError, match="no scenes"):
        HyperspectralSource(tmp_path / "e")
    with pytest.raises(FileNotFoundError):
        HyperspectralSource(tmp_path / "missing")


def test_pickles_and_reopens_per_process(scenes):
    src = HyperspectralSource(_folder(scenes))
    first = src.read(3)
    assert src._cubes  # opened lazily, kept for this process
    clone = pickle.loads(pickle.dumps(src))
    assert clone._cubes == {}
    np.testing.assert_array_equal(clone.read(3), first)
    src._pid = -1  # as seen from a forked child
    np.testing.assert_array_equal(src.read(3), first)
    src.close()
    assert src._cubes == {}


def test_changed_file_is_detected_when_reopened(scenes, tmp_path):
    src = HyperspectralSource(_folder(scenes))
    write_scene(_folder(scenes), "a", np.ones((20, 24, 11), np.int16), scenes[0]["labels"],
                None)
    with pytest.raises(FormatError, match="changed since"):
        src.read(0)


def test_band_stats_over_sampled_lines(scenes):
    src = HyperspectralSource(_folder(scenes), bands=[1, 3])
    mean, std = src.band_stats(2)  # 20 lines <= 64: every line is used
    cube = scenes[2]["cube"][[1, 3]].astype(np.float64)
    np.testing.assert_allclose(mean, cube.mean(axis=(1, 2)), rtol=1e-6)
    np.testing.assert_allclose(std, cube.std(axis=(1, 2)), rtol=1e-6)
    assert mean.dtype == std.dtype == np.float32
    few_mean, _ = src.band_stats(2, max_rows=3)  # lines 0, 10, 19
    np.testing.assert_allclose(few_mean, cube[:, [0, 10, 19]].mean(axis=(1, 2)), rtol=1e-6)


def test_band_stats_for_a_cuda_device_equal_the_cpu_ones(scenes):
    """Without a usable GPU "cuda" computes with numpy; with one, with CuPy (same to float
    tolerance). The GPU case proper is the test below, which needs CUDA."""
    src = HyperspectralSource(_folder(scenes), bands=[0, 5, 11])
    for scene in range(3):
        for got, want in zip(src.band_stats(scene, device="cuda"), src.band_stats(scene),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="device must be"):
        src.band_stats(0, device="gpu")


@pytest.mark.gpu
def test_band_stats_run_on_cupy_with_a_gpu(scenes):
    cupy = pytest.importorskip("cupy")
    from dali_pipes.geometry.bands import array_module
    assert array_module("cuda:0") is cupy
    src = HyperspectralSource(_folder(scenes))
    for scene in range(3):
        for got, want in zip(src.band_stats(scene, device="cuda:0"), src.band_stats(scene),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_patch_augment_is_pure_and_covers_the_group():
    index = np.arange(2000)
    a, b = patch_augment(7, 3, index, train=True), patch_augment(7, 3, index, train=True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    flip_h, flip_v, k = a
    assert set(k.tolist()) == {0, 1, 2, 3} and np.all(np.bincount(k) > 400)
    assert 0.45 < flip_h.mean() < 0.55 and 0.45 < flip_v.mean() < 0.55
    assert not np.array_equal(flip_h, flip_v)
    assert not np.array_equal(k, patch_augment(7, 4, index, train=True)[2])
    assert all(x.dtype == np.int32 and not x.any() for x in patch_augment(7, 3, index, train=False))
