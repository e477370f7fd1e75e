"""make_loader("hyperspectral", scenes, labels=None): scenes without label maps give the
patches of a grid tiling each scene, label -1, on both backends."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from dali_pipes.sources.hyperspectral import HyperspectralSource
from dali_pipes.sources.scene_pixels import grid_centres, grid_pixels
from torch_bridge import make_loader

pytest.importorskip("spectral")
P = 3


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Three scenes of 7 x 8 pixels with their label maps."""
    return small_scene_folder(tmp_path_factory.mktemp("hsi_unlabelled") / "scenes",
                              lines=7, samples=8, bands=4)


@pytest.fixture(scope="module")
def bare(written, tmp_path_factory):
    """The same scenes without their label maps (as third-party ENVI data comes)."""
    folder = tmp_path_factory.mktemp("hsi_bare")
    for path in written[0]["path"].parent.iterdir():
        if not path.name.endswith(".labels.npy"):
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def _all(loader):
    batches = list(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _loader(data, backend, **kw):
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("hyperspectral", data, backend=backend, batch_size=16, patch_size=P,
                       **kw)


@pytest.mark.parametrize("n, p, centres", [(7, 3, [1, 4, 6]), (9, 3, [1, 4, 7]),
                                           (8, 3, [1, 4, 7]), (2, 9, [1]), (1, 1, [0])])
def test_grid_centres_tile_the_axis(n, p, centres):
    got = grid_centres(n, p)
    assert got.tolist() == centres
    covered = np.zeros(n, bool)
    for c in got:
        covered[max(0, c - p // 2):c + p // 2 + 1] = True
    assert covered.all() and got.max() < n


def test_every_grid_patch_once_with_label_minus_one(written, bare, backend):
    out = _all(_loader(bare, backend, labels=None, train=False, shuffle=False))
    ys, xs, _ = grid_pixels(7, 8, P)
    expected = [(s, y, x) for s in range(3) for y, x in zip(ys.tolist(), xs.tolist(),
                                                              strict=True)]
    seen = [(s, y, x) for s, (y, x) in zip(out["scene"].tolist(), out["position"].tolist(),
                                           strict=True)]
    assert seen == expected and (out["label"] == -1).all()
    for cube, scene, (y, x) in zip(out["cube"].numpy(), out["scene"].tolist(),
                                   out["position"].tolist(), strict=True):
        padded = np.pad(written[scene]["cube"], ((0, 0), (1, 1), (1, 1)), mode="reflect")
        np.testing.assert_array_equal(cube, padded[:, y:y + P, x:x + P].astype(np.float32))


def test_backends_agree_and_the_order_is_the_plans(bare):
    dali = _all(_loader(bare, "dali", labels=None, seed=5))
    ref = _all(_loader(bare, "torch", labels=None, seed=5))
    assert torch.equal(dali["index"], ref["index"]) and torch.equal(dali["cube"], ref["cube"])
    assert torch.equal(dali["position"], ref["position"])
    assert dali["index"].tolist() != sorted(dali["index"].tolist())  # shuffled by the plan


def test_without_label_maps_the_default_names_the_option(bare):
    with pytest.raises(FormatError, match=r"a\.hdr: label map: missing \(labels=None .*"
                                          r"a\.labels\.npy"):
        make_loader("hyperspectral", bare, patch_size=P)


def test_label_maps_present_are_ignored_and_the_listing_differs(written):
    folder = written[0]["path"].parent
    grid = HyperspectralSource(folder, patch_size=P, labels=None)
    mapped = HyperspectralSource(folder, patch_size=P)
    assert (grid.labels == -1).all() and len(grid) == 3 * 3 * 3
    assert grid.listing_digest() != mapped.listing_digest()
    assert grid.listing_digest() != HyperspectralSource(folder, patch_size=5,
                                                        labels=None).listing_digest()


@pytest.mark.parametrize("labels, error", [("none", ValueError), (True, TypeError)])
def test_labels_is_map_or_none(bare, labels, error):
    with pytest.raises(error, match="labels"):
        make_loader("hyperspectral", bare, labels=labels)
