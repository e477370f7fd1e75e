"""bands=(low_nm, high_nm) gives every scene its channels in wavelength order (issue 15 item
10), whatever order a scene's header lists its bands in."""
import numpy as np
import pytest

from dali_pipes.sample_data.sample_hyperspectral import write_scene
from dali_pipes.sources.hyperspectral import HyperspectralSource

pytest.importorskip("spectral")


@pytest.mark.parametrize("kind", ["envi", "spe"])
def test_a_descending_scene_gets_the_same_channel_order(tmp_path, kind):
    rng = np.random.default_rng(0)
    wavelengths = np.linspace(400.0, 700.0, 7)
    values = rng.integers(0, 1000, size=(5, 6, 7)).astype(np.uint16)
    labels = np.ones((5, 6), np.int32)
    write_scene(tmp_path, "a", values, labels, wavelengths, kind=kind)
    write_scene(tmp_path, "b", values[:, :, ::-1], labels, wavelengths[::-1], kind=kind)
    src = HyperspectralSource(tmp_path, bands=(440.0, 660.0), patch_size=1)
    np.testing.assert_allclose(src.wavelengths(0), src.wavelengths(1))
    assert np.all(np.diff(src.wavelengths(1)) > 0)
    first_b = int(np.flatnonzero(src.scene_ids == 1)[0])
    np.testing.assert_array_equal(src.read(0), src.read(first_b))
