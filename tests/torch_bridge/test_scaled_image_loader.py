"""The image loader on large photos: reduced-scale decoding in the feed (CPU backend)."""
import numpy as np
import pytest
import torch

from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from dali_pipes.sources.image import ImageFolderSource
from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import SampleError, make_loader
from torch_bridge.modalities.image_scaled import scaled_decode_pays

pytest.importorskip("simplejpeg")
SIZE = 64


@pytest.fixture(scope="module")
def large_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("large")
    rng = np.random.default_rng(1)
    for i in range(8):
        h, w = ((600, 800), (800, 600))[i % 2]
        folder = root / f"class_{i % 2}"
        folder.mkdir(exist_ok=True)
        data = encode_jpeg(photo_like(rng, h, w), progressive=i % 4 == 1)
        (folder / f"p{i}.jpg").write_bytes(data)
    return root


def test_reduced_decoding_only_where_it_pays(large_folder, tmp_path):
    large = ImageFolderSource(large_folder)
    assert scaled_decode_pays(large, size=SIZE, train=True, device="cpu", enabled=True)
    assert not scaled_decode_pays(large, size=SIZE, train=True, device="gpu", enabled=True)
    assert not scaled_decode_pays(large, size=SIZE, train=True, device="cpu", enabled=False)
    assert not scaled_decode_pays(large, size=224, train=True, device="cpu", enabled=True)
    small = ImageFolderSource(write_image_folder(tmp_path / "s", n_images=4, n_classes=2))
    assert not scaled_decode_pays(small, size=16, train=True, device="cpu", enabled=True)


def _batches(folder, backend, **kw):
    loader = make_loader("image", folder, backend=backend, device="cpu", batch_size=4,
                         seed=3, size=SIZE, **kw)
    return loader, list(loader)


def test_backends_agree_on_the_same_windows(large_folder):
    loader, dali = _batches(large_folder, "dali")
    assert loader._engine.modality._scaled  # the reduced-scale graph ran
    _, ref = _batches(large_folder, "torch")
    assert len(dali) == len(ref) == 2
    for a, b in zip(dali, ref, strict=True):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["label"], b["label"])
        assert a["image"].shape == (4, 3, SIZE, SIZE) and a["image"].dtype == torch.float32
        diff = (a["image"] - b["image"]).abs()
        # as test_loader_contract's bound (0.05, about 3 grey levels): a wrong window or a
        # missed flip gives 0.3 and more
        assert diff.mean() < 0.06, diff.mean()


def test_exact_preset_decodes_at_full_resolution(large_folder):
    loader, batches = _batches(large_folder, "dali", config="exact")
    assert not loader._engine.modality._scaled and len(batches) == 2


def test_a_file_libjpeg_rejects_follows_on_error(large_folder, tmp_path):
    import shutil
    root = tmp_path / "bad"
    shutil.copytree(large_folder, root)
    bad = root / "class_0" / "p2.jpg"
    bad.write_bytes(undefined_quant_table(bad.read_bytes()))
    loader, batches = _batches(root, "dali", on_error="skip", shuffle=False)
    assert sum(len(b["label"]) for b in batches) == 7
    assert [s.path for s in loader.skipped] == [str(bad)] and loader.skipped[0].reason
    with pytest.raises(SampleError, match="p2.jpg"):
        _batches(root, "dali", shuffle=False)


def test_the_first_build_decides_and_keeps_the_decode_threads(large_folder):
    import dataclasses

    from dali_pipes.pipelines.config import load_config
    from torch_bridge.modalities.image import ImageModality
    modality = ImageModality(large_folder, seed=0, size=SIZE)
    # the feed's decoding (the graph's JPEG crop decoder off; tested below)
    config = dataclasses.replace(load_config(None), num_threads=3, jpeg_partial_decode=False)
    modality.build_pipeline(device="cpu", batch_size=4, config=config)
    assert modality._scaled and modality._decode_opts["threads"] == 3
    # the engine's one-sample blame pipeline: same graph inputs, feed threads untouched
    probe = modality.build_pipeline(device="cpu", batch_size=1,
                                    config=dataclasses.replace(config, num_threads=1))
    assert modality._decode_opts["threads"] == 3
    from torch_bridge.errors import SampleGuard
    feeds, kept = modality.feeds(0, np.array([5]), SampleGuard("raise"))
    assert kept.tolist() == [5] and set(feeds) == {"pixels", "roi_start", "roi_end", "mirror"}
    probe.build()
    for name, values in feeds.items():
        probe.feed_input(name, values)
    (out,) = probe.run()
    assert np.asarray(out[0]).shape == (3, SIZE, SIZE)


@pytest.mark.parametrize("options", [{"adjust_orientation": True}, {"alpha": "keep"}])
def test_decode_options_turn_reduced_decoding_off(large_folder, options):
    """The reduced-scale decode in the feed knows neither EXIF orientation nor alpha."""
    loader = make_loader("image", large_folder, backend="dali", device="cpu", batch_size=4,
                         seed=3, size=SIZE, **options)
    batch = next(iter(loader))
    assert not loader._engine.modality._scaled
    assert batch["image"].shape[1] == (4 if "alpha" in options else 3)


def test_the_graphs_jpeg_crop_decoder_scales_in_the_graph_with_the_feeds_pixels(large_folder):
    """With the native JPEG crop decoder the same windows are decoded at the same DCT
    scales inside the graph (DpDecodeCropResize), giving the feed path's pixels exactly."""
    from dali_pipes import native
    if native.library("decode_crop_op") is None:
        pytest.skip(f"DpDecodeCropResize unavailable: {native.why_not('decode_crop_op')}")
    loader, graph = _batches(large_folder, "dali")
    modality = loader._engine.modality
    assert modality._scaled and modality._scaled_in_graph
    feed_loader, feed = _batches(large_folder, "dali", config={"jpeg_partial_decode": False})
    assert feed_loader._engine.modality._scaled
    assert not feed_loader._engine.modality._scaled_in_graph
    assert len(graph) == len(feed) == 2
    for a, b in zip(graph, feed, strict=True):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["image"], b["image"])
