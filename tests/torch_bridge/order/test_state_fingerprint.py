"""state_dict's order fingerprint: resume only into a loader that yields the same order.

The fingerprint covers what defines the epoch's global order (listing, seed, shuffle,
modality, sampler options); the layout (world size, batch size, drop_last) is outside it,
since a state resumes across those (elastic resume, tests/torch_bridge/test_elastic.py).
"""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

from tests.conftest import BACKENDS, MODALITY_KINDS, write_image_folder
from torch_bridge import make_loader


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
    assert {k: order[k] for k in ("seed", "shuffle", "modality")} == \
        {"seed": 1, "shuffle": True, "modality": "image"}
    assert not {"world_size", "batch_size", "drop_last"} & set(order)  # the layout is apart
    assert {k: state[k] for k in ("version", "world_size", "batch_size", "drop_last",
                                  "resumed")} == {"version": 2, "world_size": 1,
                                                  "batch_size": 4, "drop_last": False,
                                                  "resumed": None}
    assert _loader(folder, "dali").state_dict()["fingerprint"] == state["fingerprint"]


def test_the_fingerprint_is_the_same_under_every_layout(folder):
    """Only the global order is fingerprinted: another world size, rank, batch size or
    drop_last gives the same fingerprint (so a state can move between them)."""
    base = _loader(folder, "torch").state_dict()["fingerprint"]
    for change in ({"rank": 1, "world_size": 3}, {"batch_size": 3}, {"drop_last": True}):
        assert _loader(folder, "torch", **change).state_dict()["fingerprint"] == base
    assert _loader(folder, "torch", seed=2).state_dict()["fingerprint"] != base


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_data_resumes_even_when_moved(folder, tmp_path, backend):
    state = _saved_state(folder, backend)
    full = [b["index"] for b in _loader(folder, backend)]
    moved = shutil.copytree(folder, tmp_path / "elsewhere")
    resumed = _loader(moved, backend)
    resumed.load_state_dict(state)
    rest = [b["index"] for b in resumed]
    assert len(rest) == len(full) - 2
    assert all(torch.equal(a, b) for a, b in zip(full[2:], rest, strict=True))


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
@pytest.mark.parametrize("change, match", [({"shuffle": False}, "shuffle is True .* but False"),
                                           ({"seed": 2}, "seed is 1"),
                                           ({"seed": 2, "batch_size": 3}, "seed is 1")])
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


def _as_version_1(state: dict) -> dict:
    """The state a version-1 loader saved at the same point: the layout inside `order`,
    fingerprinted with it, no `batch_size` / `drop_last` / `resumed` at the top."""
    order = dict(state["order"], world_size=state["world_size"],
                 batch_size=state["batch_size"], drop_last=state["drop_last"])
    old = {k: v for k, v in state.items() if k not in ("batch_size", "drop_last", "resumed")}
    return dict(old, version=1, order=order, fingerprint=hashlib.sha256(
        json.dumps(order, sort_keys=True).encode()).hexdigest())


def test_state_without_fingerprint_uses_the_per_key_checks(folder):
    state = _as_version_1(_saved_state(folder, "torch"))
    del state["fingerprint"], state["order"]
    loader = _loader(folder, "torch")
    loader.load_state_dict(state)
    assert loader.state_dict()["batches_consumed"] == 2
    with pytest.raises(ValueError, match="world_size is 1 in the state but 2"):
        _loader(folder, "torch", rank=0, world_size=2).load_state_dict(state)


def test_a_version_2_state_without_its_fingerprint_is_refused(folder):
    state = _saved_state(folder, "torch")
    del state["fingerprint"]
    with pytest.raises(ValueError, match="version-2 state needs 'order'.*'fingerprint'"):
        _loader(folder, "torch").load_state_dict(state)


@pytest.mark.parametrize("version, match", [
    (3, "has version 3, newer than this torch_bridge reads \\(2\\)"),
    (0, "state\\['version'\\] is 0"), ("2", "state\\['version'\\] is '2'"),
    (None, "state\\['version'\\] is None"), (True, "is True")])
def test_unknown_or_newer_versions_are_refused(folder, version, match):
    state = _saved_state(folder, "torch")
    state["version"] = version
    loader = _loader(folder, "torch")
    with pytest.raises(ValueError, match=match):
        loader.load_state_dict(state)
    assert loader.state_dict()["batches_consumed"] == 0  # nothing was loaded


@pytest.mark.parametrize("key, value, match", [
    ("epoch", -1, "state\\['epoch'\\] is -1"), ("batches_consumed", "2", "batches_consumed"),
    ("batches_consumed", 99, "batches_consumed is 99 but the epoch has 3 batches"),
    ("world_size", 0, "state\\['world_size'\\] is 0"), ("drop_last", 1, "drop_last"),
    ("resumed", {"start": 5, "stop": 2}, "resumed"),
    ("resumed", {"start": 0, "stop": 11}, "exceeds the 10 entries of epoch 0")])
def test_malformed_fields_are_refused_naming_them(folder, key, value, match):
    state = _saved_state(folder, "torch")
    state[key] = value
    with pytest.raises(ValueError, match=match):
        _loader(folder, "torch").load_state_dict(state)


def test_a_version_1_state_still_loads_and_resumes_exactly(folder):
    state = _as_version_1(_saved_state(folder, "torch"))
    full = [b["index"] for b in _loader(folder, "torch")]
    resumed = _loader(folder, "torch")
    resumed.load_state_dict(state)
    rest = [b["index"] for b in resumed]
    assert len(rest) == len(full) - 2
    assert all(torch.equal(a, b) for a, b in zip(full[2:], rest, strict=True))
    assert resumed.state_dict()["version"] == 2


def test_a_version_1_state_loads_elastically_and_is_still_checked(folder, tmp_path):
    state = _as_version_1(_saved_state(folder, "torch"))  # 1 rank, batches of 4, 2 taken
    done = set(_loader(folder, "torch").plan.order(0)[:8].tolist())
    halves = [_loader(folder, "torch", rank=r, world_size=2, batch_size=3) for r in (0, 1)]
    for loader in halves:
        loader.load_state_dict(state)
    rest = [i for loader in halves for b in loader for i in b["index"].tolist()]
    assert set(rest) == set(range(10)) - done and len(rest) == 2
    tampered = dict(state, fingerprint="0" * 64)
    with pytest.raises(ValueError, match="fingerprint differs"):
        _loader(folder, "torch").load_state_dict(tampered)
    other = write_image_folder(tmp_path / "seven", n_images=7, n_classes=2)
    with pytest.raises(ValueError, match="num_samples is 10 .* but 7"):
        _loader(other, "torch").load_state_dict(state)


# Every modality ---------------------------------------------------------------------------
# The same checks on each modality's tiny data (tests/conftest.py: TinyData), frame folders
# included: the listing, seed, shuffle and sampler options are in the fingerprint.
FILES = {"image": 10, "video": 5, "frames": 5, "hyperspectral": 3, "fusion": 5,
         "detection": 10, "arrays": 10}


@pytest.fixture(params=MODALITY_KINDS)
def tiny(request, tiny_data):
    return tiny_data(request.param)


def _tiny_state(tiny, backend="torch", data=None, **overrides):
    loader = tiny.loader(backend, data=data, seed=1, **overrides)
    next(iter(loader))
    return loader.state_dict()


def _rename_one_sample(root):
    """Rename one sample's files in place, keeping the sample count."""
    if (root / "instances.json").exists():  # detection: the image and its COCO file_name
        victim = sorted(root.glob("*.jpg"))[-1]
        victim.rename(victim.with_name("zz_" + victim.name))
        coco = root / "instances.json"
        coco.write_text(coco.read_text().replace(f'"{victim.name}"', f'"zz_{victim.name}"'))
        return
    for pattern in ("class_1/*.jpg", "class_1/*.webm", "c.spe", "square/*.npy"):
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
    assert (order["modality"], order["seed"], states[0]["world_size"]) == (tiny.modality, 1, 1)
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
    ({"seed": 2, "rank": 0, "world_size": 2}, "seed is 1 in the state but 2"),
    ({"shuffle": False}, "shuffle is True in the state but False"),
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
