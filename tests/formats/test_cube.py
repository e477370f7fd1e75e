"""ENVI cubes and SPE files both satisfy the Cube protocol (issue 11 item 4): one geometry,
one read_window in (band, line, sample) order, the files behind them."""
import numpy as np
import pytest

from dali_pipes.formats import open_envi, open_spe
from dali_pipes.formats.cube import Cube
from dali_pipes.sample_data.sample_hyperspectral import write_scene

pytest.importorskip("spectral")


@pytest.mark.parametrize("kind", ["envi", "spe"])
def test_both_readers_are_cubes_with_the_same_window(tmp_path, kind):
    values = np.random.default_rng(0).integers(0, 999, size=(5, 6, 4)).astype(np.uint16)
    path = write_scene(tmp_path, "s", values, np.ones((5, 6), np.int32),
                       np.linspace(400.0, 700.0, 4), kind=kind)
    with (open_envi if kind == "envi" else open_spe)(path) as cube:
        assert isinstance(cube, Cube)
        assert cube.geometry == (4, 5, 6)  # (bands, lines, samples) for both
        window = cube.read_window(1, 2, 3, 4, [3, 0])
        np.testing.assert_array_equal(window, values.transpose(2, 0, 1)[[3, 0], 1:4, 2:6])
        assert window.flags.c_contiguous
        assert cube.files[0] == str(path) and len(cube.files) == (2 if kind == "envi" else 1)
        with pytest.raises(ValueError, match="h must be a positive int"):
            cube.read_window(0, 0, 0, 1)
