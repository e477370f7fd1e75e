"""make_loader("hyperspectral", ...): the loader contract on ENVI/SPE scenes, and both backends
against the values written to disk."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import re

import numpy as np
import pytest
import torch

from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from dali_pipes.sources.hyperspectral import patch_augment
from torch_bridge import SampleError, make_loader
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.hyperspectral import HyperspectralModality
from torch_bridge.testing.loader_contract import LoaderContract

pytest.importorskip("spectral")
P = 5


class TestHyperspectralContract(LoaderContract):
    kind, main, sample_shape = "hyperspectral", "cube", (4, 3, 3)
    exact = ("index", "label", "position", "scene", "cube")  # flips and turns are exact

    def break_samples(self, root, modality):
        """Files are validated when the loader is made and opened on first read; a file
        that breaks in between fails every sample of its scene, which on_error handles."""
        data = root / "b.img"
        data.write_bytes(data.read_bytes()[:-2])
        bad = set(np.flatnonzero(modality.source.scene_ids == 1).tolist())
        return bad, r"/b\.hdr", r"b\.img: data size"


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    return small_scene_folder(tmp_path_factory.mktemp("hsi") / "scenes")


def _folder(scenes):
    return scenes[0]["path"].parent


def _loader(data, backend, **kw):
    kw.setdefault("batch_size", 32)
    kw.setdefault("patch_size", P)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("hyperspectral", data, backend=backend, **kw)


def _all(loader):
    batches = list(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _expected(scenes, scene, position, bands=None, p=P):
    """The file's patch with numpy reflect padding, cast to float32."""
    cube = scenes[scene]["cube"] if bands is None else scenes[scene]["cube"][bands]
    r, (y, x) = p // 2, position
    padded = np.pad(cube, ((0, 0), (r, r), (r, r)), mode="reflect")
    return padded[:, y:y + p, x:x + p].astype(np.float32)


def _n_labeled(scenes):
    return sum(int((s["labels"] != 0).sum()) for s in scenes)


def test_labels_are_the_map_at_each_position(scenes, backend):
    batch = next(iter(_loader(_folder(scenes), backend)))
    assert batch["cube"].shape == (32, 12, P, P) and batch["position"].shape == (32, 2)
    for scene, (y, x), label in zip(batch["scene"].tolist(), batch["position"].tolist(),
                                    batch["label"].tolist(), strict=True):
        assert label == scenes[scene]["labels"][y, x] - 1 >= 0


def test_every_labeled_pixel_once_per_pass(scenes, backend):
    out = _all(_loader(_folder(scenes), backend, seed=3))
    n = _n_labeled(scenes)
    assert sorted(out["index"].tolist()) == list(range(n))
    seen = {(s, y, x) for s, (y, x) in zip(out["scene"].tolist(), out["position"].tolist(),
                                           strict=True)}
    truth = {(i, int(y), int(x)) for i, s in enumerate(scenes)
             for y, x in zip(*np.nonzero(s["labels"]), strict=True)}
    assert seen == truth


def test_eval_cubes_equal_the_files_reflect_padded(scenes, backend):
    out = _all(_loader(_folder(scenes), backend, train=False, shuffle=False))
    for cube, scene, position in zip(out["cube"].numpy(), out["scene"].tolist(),
                                     out["position"].tolist(), strict=True):
        np.testing.assert_array_equal(cube, _expected(scenes, scene, position))


def test_train_backends_identical_and_equal_rot90_of_flips(scenes):
    dali = _all(_loader(_folder(scenes), "dali", seed=4))
    ref = _all(_loader(_folder(scenes), "torch", seed=4))
    assert torch.equal(dali["index"], ref["index"]) and torch.equal(dali["cube"], ref["cube"])
    flip_h, flip_v, k = patch_augment(4, 0, dali["index"].numpy(), train=True)
    changed = 0
    for i, (scene, position) in enumerate(zip(dali["scene"].tolist(),
                                              dali["position"].tolist(), strict=True)):
        plain = _expected(scenes, scene, position)
        flipped = plain[:, ::-1] if flip_v[i] else plain
        flipped = flipped[:, :, ::-1] if flip_h[i] else flipped
        np.testing.assert_array_equal(dali["cube"][i].numpy(), np.rot90(flipped, k[i], (1, 2)))
        changed += not np.array_equal(dali["cube"][i].numpy(), plain)
    assert changed > len(k) // 2


def test_bands_by_index_and_by_wavelength_range(scenes, backend):
    for bands, expected_bands in (([11, 0, 3], [11, 0, 3]), ((480.0, 720.0), [2, 3, 4, 5, 6])):
        out = _all(_loader(_folder(scenes), backend, train=False, bands=bands))
        assert out["cube"].shape[1] == len(expected_bands)
        for i in range(0, len(out["index"]), 17):
            expected = _expected(scenes, int(out["scene"][i]), out["position"][i].tolist(),
                                 expected_bands)
            np.testing.assert_array_equal(out["cube"][i].numpy(), expected)


def test_normalize_backends_agree(scenes):
    dali = _all(_loader(_folder(scenes), "dali", seed=1, normalize=True))
    ref = _all(_loader(_folder(scenes), "torch", seed=1, normalize=True))
    torch.testing.assert_close(dali["cube"], ref["cube"], rtol=0, atol=0)
    centre = dali["cube"][:, :, P // 2, P // 2]  # the labeled pixels, about half of each scene
    assert centre.mean(dim=0).abs().max() < 0.2 and 0.8 < centre.std(dim=0).mean() < 1.2


def test_scenes_are_numbered_across_folders(tmp_path, backend):
    a = small_scene_folder(tmp_path / "one", lines=6, samples=7, bands=4)
    b = small_scene_folder(tmp_path / "two", lines=5, samples=6, bands=4, seed=1)
    out = _all(_loader([_folder(a), _folder(b)], backend, shuffle=False))
    assert out["scene"].tolist() == sorted(out["scene"].tolist())
    assert out["scene"].max().item() == 5 and out["source_id"].max().item() == 1


def test_reference_with_workers_matches_in_process(scenes):
    a = _all(_loader(_folder(scenes), "torch", seed=6))
    b = _all(_loader(_folder(scenes), "torch", seed=6, reference={"num_workers": 2}))
    assert torch.equal(a["cube"], b["cube"]) and torch.equal(a["index"], b["index"])


def test_bad_files_and_options_fail_on_make_loader(tmp_path):
    scenes = small_scene_folder(tmp_path / "s", lines=6, samples=7, bands=4)
    with pytest.raises(ValueError, match="patch_size"):
        make_loader("hyperspectral", _folder(scenes), patch_size=4)
    with pytest.raises(ValueError, match="normalize"):
        make_loader("hyperspectral", _folder(scenes), normalize="yes")
    (_folder(scenes) / "b.labels.npy").unlink()
    with pytest.raises(FormatError, match=r"b\.hdr: label map"):
        make_loader("hyperspectral", _folder(scenes))
    scenes = small_scene_folder(tmp_path / "t", lines=6, samples=7, bands=4)
    data = _folder(scenes) / "c.spe"
    data.write_bytes(data.read_bytes()[:4200])  # header and part of the frames
    with pytest.raises(FormatError, match=r"c\.spe"):
        make_loader("hyperspectral", _folder(scenes))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_cuda_batches_are_on_the_gpu_and_match_cpu(scenes, backend):
    for normalize in (False, True):
        gpu = _all(_loader(_folder(scenes), backend, device="cuda", seed=5, normalize=normalize))
        cpu = _all(_loader(_folder(scenes), "torch", seed=5, normalize=normalize))
        assert all(t.device.type == "cuda" for t in gpu.values())
        assert torch.equal(gpu["index"].cpu(), cpu["index"])
        # Flips and turns are exact; GPU division may round differently in the last bit.
        torch.testing.assert_close(gpu["cube"].cpu(), cpu["cube"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scene,data_name", [(0, "a.img"), (2, "c.spe")])
@pytest.mark.parametrize("on_error", ["skip", "raise"])
@pytest.mark.parametrize("workers", [0, 2])
def test_cube_truncated_mid_loader_fails_its_samples_not_the_process(
        tmp_path, backend, scene, data_name, on_error, workers):
    """A cube cut short while the loader reads it (its file mapped) loses lines 10 and
    up. Samples whose window needs them (centre line >= 8 with P=5) fail with FormatError and
    on_error applies; with a plain memmap the process would die of SIGBUS instead.
    With workers (DALI's feed processes or the DataLoader's, each mapping files itself) a
    worker that had not mapped the file yet finds it broken on open and fails all its samples
    of that scene, so only "at least the lost lines' samples, only that scene's" is certain."""
    scenes = small_scene_folder(tmp_path / "s")
    folder, (samples, bands) = _folder(scenes), (scenes[0]["labels"].shape[1], 12)
    parallel = {"config": {"py_num_workers": workers}} if backend == "dali" else \
        {"reference": {"num_workers": workers}}
    loader = _loader(folder, backend, on_error=on_error, batch_size=8, shuffle=False,
                     train=False, **parallel)
    offsets = np.cumsum([0] + [int((s["labels"] != 0).sum()) for s in scenes])
    ys = np.nonzero(scenes[scene]["labels"])[0]
    bad = set((offsets[scene] + np.flatnonzero(ys >= 8)).tolist())
    in_scene = set(range(offsets[scene], offsets[scene + 1]))
    it = iter(loader)
    batches = [next(it)]
    while batches[-1]["index"].max() < offsets[scene]:  # until the scene's file is mapped
        batches.append(next(it))
    keep = 10 * samples * bands * 2  # int16 / uint16 lines 0..9
    os.truncate(folder / data_name, keep + (4100 if data_name.endswith(".spe") else 0))
    reason = rf"{data_name}: data size: file was truncated" if workers == 0 else \
        rf"{data_name}: (data size|XML_Offset)"
    if on_error == "raise":
        first = rf"sample {min(bad)} " if workers == 0 else r"sample \d+ "
        with pytest.raises(SampleError, match=first + rf"\(.*\).*{reason}") as info:
            batches += list(it)
        assert int(re.search(r"sample (\d+) ", str(info.value)).group(1)) in in_scene
        return
    batches += list(it)
    out = {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    skipped = {s.index for s in loader.skipped}
    assert len(loader.skipped) == len(skipped) and all(
        re.search(reason, s.reason) for s in loader.skipped)
    assert (skipped == bad) if workers == 0 else (bad <= skipped <= in_scene)
    assert sorted(out["index"].tolist()) == sorted(set(range(offsets[-1])) - skipped)
    for cube, s, position in zip(out["cube"].numpy(), out["scene"].tolist(),
                                 out["position"].tolist(), strict=True):
        np.testing.assert_array_equal(cube, _expected(scenes, s, position))


def _feeds_in_forked_child(modality, indices):
    """modality.feeds(...) in a forked child using the inherited object (nothing pickled on
    the way in); returns the child's feeds and whether its source reopened its own maps."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def work():
        feeds = modality.feeds(2, indices, SampleGuard("raise"))
        send.send((feeds, modality.source._pid == os.getpid()))

    child = ctx.Process(target=work)
    child.start()
    got = receive.recv() if receive.poll(60) else None
    child.join(60)
    assert child.exitcode == 0 and got is not None
    return got


def test_modality_pickles_without_its_cubes_and_feeds_the_same_in_fork_and_spawn(scenes):
    modality = HyperspectralModality(_folder(scenes), seed=3, patch_size=P, normalize=True)
    indices = np.arange(0, len(modality), 5, dtype=np.int64)
    want, kept = modality.feeds(2, indices, SampleGuard("raise"))  # maps open in this process
    assert modality.source._cubes
    blob = pickle.dumps(modality)
    for name in ("a.img", "b.img", "c.spe"):  # no stretch of any cube travels with it
        raw = (_folder(scenes) / name).read_bytes()
        assert raw[len(raw) // 2:len(raw) // 2 + 256] not in blob, name
    copies = {"pickled": (pickle.loads(blob).feeds(2, indices, SampleGuard("raise")), True)}
    copies["fork"] = _feeds_in_forked_child(modality, indices)
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # the modality pickled over
        copies["spawn"] = (pool.apply(modality.feeds, (2, indices, SampleGuard("raise"))),
                           True)
    for how, ((feeds, got_kept), reopened) in copies.items():
        assert reopened and np.array_equal(got_kept, kept) and feeds.keys() == want.keys(), how
        for name in want:
            np.testing.assert_array_equal(feeds[name], want[name], err_msg=f"{how}: {name}")
