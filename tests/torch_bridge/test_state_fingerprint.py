"""state_dict's order fingerprint: resume only into a loader that yields the same order."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.conftest import MODALITY_KINDS, write_image_folder
from torch_bridge import make_loader

BACKENDS = ["dali", "torch"]


def _loader(data, backend, **overrides):
    options = dict(backend=backend, batch_size=4, size=32, seed=1, shuffle=True)
    if backend == "torch":  # workers add seconds per loader and change nothing here
        options["reference"] = {"num_workers": 0}
    options.update(overrides)
    return make_loader("image", data, **options)


def _saved_state(data, backend, batches=2, **overrides):
    loader = _loader(data, backend, **overrides)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    return loader.state_dict()


@pytest.fixture()
def folder(tmp_path):
    return write_image_folder(tmp_path / "data", n_images=10, n_classes=2)


def test_state_carries_a_serialisable_fingerprint(folder):
    state = _loader(folder, "torch").state_dict()
    assert len(state["fingerprint"]) == 64 and int(state["fingerprint"], 16) >= 0
    assert json.loads(json.dumps(state)) == state
    order = state["order"]
    assert order["listing"].startswith("10 files")
    assert {k: order[k] for k in ("seed", "shuffle", "drop_last", "world_size", "batch_size",
                                  "modality")} == {"seed": 1, "shuffle": True,
                                                   "drop_last": False, "world_size": 1,
                                                   "batch_size": 4, "modality": "image"}
    assert _loader(folder, "dali").state_dict()["fingerprint"] == state["fingerprint"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_data_resumes_even_when_moved(folder, tmp_path, backend):
    state = _saved_state(folder, backend)
    full = [b["index"] for b in _loader(folder, backend)]
    moved = shutil.copytree(folder, tmp_path / "elsewhere")
    resumed = _loader(moved, backend)
    resumed.load_state_dict(state)
    rest = [b["index"] for b in resumed]
    assert len(rest) == len(full) - 2
    assert all(torch.equal(a, b) for a, b in zip(full[2:], rest))


@pytest.mark.parametrize("backend", BACKENDS)
def test_renamed_file_is_refused_naming_the_listing(folder, backend):
    state = _saved_state(folder, backend)
    victim = next(folder.glob("class_0/*.jpg"))
    victim.rename(victim.with_name("zz_renamed.jpg"))
    with pytest.raises(ValueError, match="listing is '10 files.*but '10 files"):
        _loader(folder, backend).load_state_dict(state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_added_and_removed_file_same_count_is_refused(folder, backend):
    state = _saved_state(folder, backend)
    files = sorted(folder.glob("class_1/*.jpg"))
    shutil.copy(files[0], folder / "class_0" / "extra.jpg")
    files[-1].unlink()
    with pytest.raises(ValueError, match="listing") as info:
        _loader(folder, backend).load_state_dict(state)
    assert "num_samples" not in str(info.value)  # the count is the same: only the listing


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change, match", [({"batch_size": 3}, "batch_size is 4 .* but 3"),
                                           ({"shuffle": False}, "shuffle is True .* but False"),
                                           ({"drop_last": True}, "drop_last"),
                                           ({"seed": 2}, "seed is 1")])
def test_other_order_options_are_refused(folder, backend, change, match):
    state = _saved_state(folder, backend)
    loader = _loader(folder, backend, **change)
    with pytest.raises(ValueError, match=match):
        loader.load_state_dict(state)
    assert loader.epoch == 0  # nothing was loaded


def test_other_data_set_still_names_num_samples(folder, tmp_path):
    other = write_image_folder(tmp_path / "other", n_images=7, n_classes=2)
    with pytest.raises(ValueError, match="num_samples is 10 .* but 7"):
        _loader(other, "torch").load_state_dict(_saved_state(folder, "torch"))


def test_tampered_fingerprint_is_refused(folder):
    state = _saved_state(folder, "torch")
    state["fingerprint"] = "0" * 64
    with pytest.raises(ValueError, match="fingerprint differs"):
        _loader(folder, "torch").load_state_dict(state)


def test_state_without_fingerprint_uses_the_per_key_checks(folder):
    state = _saved_state(folder, "torch")
    del state["fingerprint"], state["order"]
    loader = _loader(folder, "torch")
    loader.load_state_dict(state)
    assert loader.state_dict()["batches_consumed"] == 2


# Every modality ---------------------------------------------------------------------------
# The same checks on each modality's tiny data (tests/conftest.py: TinyData), frame folders
# included: the listing, seed, world size and sampler options are in the fingerprint.
FILES = {"image": 10, "video": 5, "frames": 5, "hyperspectral": 3, "fusion": 5}


@pytest.fixture(params=MODALITY_KINDS)
def tiny(request, tiny_data):
    return tiny_data(request.param)


def _tiny_state(tiny, backend="torch", data=None, **overrides):
    loader = tiny.loader(backend, data=data, seed=1, **overrides)
    next(iter(loader))
    return loader.state_dict()


def _rename_one_sample(root):
    """Rename one sample's files in place, keeping the sample count."""
    for pattern in ("class_1/*.jpg", "class_1/*.webm", "c.spe"):
        found = sorted(root.glob(pattern))
        if found:
            victim = found[-1]
            break
    else:  # frame folders: class_1/<clip folder>
        victim = sorted(p for p in root.glob("class_1/*") if p.is_dir())[-1]
    for sibling in sorted(victim.parent.glob(victim.name.split(".")[0] + ".*")) or [victim]:
        sibling.rename(sibling.with_name("zz_" + sibling.name))


def test_every_modality_states_its_listing(tiny):
    states = [_tiny_state(tiny, backend) for backend in BACKENDS]
    assert states[0]["fingerprint"] == states[1]["fingerprint"]
    order = states[0]["order"]
    assert order["listing"].startswith(f"{FILES[tiny.kind]} files, sha256 ")
    assert (order["modality"], order["seed"], order["world_size"]) == (tiny.modality, 1, 1)
    assert json.loads(json.dumps(states[0])) == states[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_modality_refuses_a_renamed_sample_and_accepts_a_moved_data_set(
        tiny, tmp_path, backend):
    state = _tiny_state(tiny, backend)
    moved = shutil.copytree(tiny.one, tmp_path / "moved")
    resumed = tiny.loader(backend, data=moved, seed=1)
    resumed.load_state_dict(state)  # the same files elsewhere: accepted
    assert resumed.state_dict()["batches_consumed"] == 1
    _rename_one_sample(moved)
    renamed = tiny.loader(backend, data=moved, seed=1)
    assert len(renamed.plan) == len(resumed.plan)
    with pytest.raises(ValueError, match=r"listing is '\d+ files, sha256 \w+[^']*' in the state"):
        renamed.load_state_dict(state)
    assert renamed.state_dict()["batches_consumed"] == 0  # nothing was loaded


@pytest.mark.parametrize("change, match", [
    ({"seed": 2}, "seed is 1 in the state but 2"),
    ({"rank": 0, "world_size": 2}, "world_size is 1 in the state but 2"),
    ({"shuffle": False}, "shuffle is True in the state but False"),
    ({"drop_last": True}, "drop_last is False in the state but True"),
    ({"sampling": "class_balanced"}, "sampling is None in the state but 'class_balanced'")])
def test_every_modality_refuses_other_order_options(tiny, change, match):
    state = _tiny_state(tiny)
    loader = tiny.loader("torch", **{"seed": 1, **change})
    with pytest.raises(ValueError, match=match):
        loader.load_state_dict(state)


def test_every_modality_refuses_other_sampler_options(tiny):
    state = _tiny_state(tiny, data=tiny.two, min_per_source=1, batch_size=4)
    assert state["order"]["min_per_source"] == 1
    with pytest.raises(ValueError, match="min_per_source is 1 in the state but 2"):
        tiny.loader("torch", data=tiny.two, seed=1, min_per_source=2,
                    batch_size=4).load_state_dict(state)
    with pytest.raises(ValueError, match="min_per_source is 1 in the state but None"):
        tiny.loader("torch", data=tiny.two, seed=1, batch_size=4).load_state_dict(state)
    state = _tiny_state(tiny, sampling="class_balanced")
    with pytest.raises(ValueError, match="sampling is 'class_balanced' in the state but None"):
        tiny.loader("torch", seed=1).load_state_dict(state)


def test_every_modality_refuses_a_state_of_one_source_in_two(tiny):
    state = _tiny_state(tiny)
    with pytest.raises(ValueError, match="num_samples is .* listing is"):
        tiny.loader("torch", data=tiny.two, seed=1).load_state_dict(state)


def test_the_listing_is_hashed_once_per_loader(folder):
    """state_dict() reuses the order computed when the loader was made: the listing is fixed
    then, so a change to the source's file list afterwards does not reach the state."""
    loader = _loader(folder, "torch")
    first = loader.state_dict()
    source = loader._engine.modality.source
    source.files = tuple(reversed(source.files))
    second = loader.state_dict()
    assert second["fingerprint"] == first["fingerprint"] and second["order"] == first["order"]
    second["order"]["seed"] = 99  # the state is a copy: editing it changes nothing
    assert loader.state_dict()["order"]["seed"] == 1
