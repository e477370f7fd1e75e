"""Option groups and their shorthands: a flat keyword (`mixup=0.2`, `repeats=2`,
`config=...`), its group given whole (`mixing=Mixing(...)`, `sampling=Sampling(...)`,
`backend=DaliBackend(...)`) and as a dict make the same validated object and the same
batches; a shorthand that disagrees with its group is refused naming both; a misspelt one is
answered with the likely meant name, as the flat options are."""
from __future__ import annotations

import pytest
import torch

from dali_pipes.geometry.detection_options import DetectionCrop, detection_options
from dali_pipes.pipelines.config import load_config
from dali_pipes.recipes import Erasing, ImageRecipe, Mixing, Photometric, image_recipe
from dali_pipes.recipes.files import load_recipe
from torch_bridge import DaliBackend, Sampling, TorchBackend, make_loader, registry

MIX = dict(mixup=0.2, cutmix=1.0, label_smoothing=0.1)


def _batches(loader) -> list[dict[str, torch.Tensor]]:
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_a_recipe_group_validates_as_its_shorthands():
    flat = image_recipe(**MIX, erasing=0.25, erasing_value="random", color_jitter=0.4)
    assert flat == image_recipe(mixing=Mixing(**MIX), erasing=Erasing(p=0.25, value="random"),
                                photometric=Photometric(color_jitter=0.4))
    assert flat == image_recipe(mixing=MIX, erasing={"p": 0.25, "erasing_value": "random"},
                                photometric={"color_jitter": 0.4})
    assert flat.mixing.active and flat.erasing.p == 0.25
    assert flat.photometric.color_jitter == (0.4, 0.4, 0.4, 0.0)  # validated as before
    assert image_recipe() == ImageRecipe() and ImageRecipe().is_default_graph


def test_a_group_value_is_validated_naming_the_option():
    with pytest.raises(ValueError, match=r"image option mixup=-1 is out of range"):
        image_recipe(mixing=Mixing(mixup=-1))
    with pytest.raises(ValueError, match=r"image option erasing=2 is out of range"):
        image_recipe(erasing={"p": 2})


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_shorthands_and_groups_give_the_same_batches(tiny_data, backend):
    data = tiny_data("image")
    kw = dict(batch_size=4, seed=3)
    flat = _batches(data.loader(backend, **kw, **MIX, erasing=0.5, sampling="repeated",
                                repeats=2))
    grouped = _batches(data.loader(backend, **kw, mixing=Mixing(**MIX),
                                   erasing=Erasing(p=0.5),
                                   sampling=Sampling(kind="repeated", repeats=2)))
    dicts = _batches(data.loader(backend, **kw, mixing=MIX, erasing={"p": 0.5},
                                 sampling={"kind": "repeated", "repeats": 2}))
    assert "target" in flat[0]
    _same(flat, grouped)
    _same(flat, dicts)


def test_backend_values_and_their_shorthands(tiny_data):
    data = tiny_data("image")
    flat = data.loader("torch", reference={"num_workers": 0, "prefetch_factor": 3})
    value = data.loader(TorchBackend(num_workers=0, prefetch_factor=3))
    assert flat.backend == value.backend == "torch" and flat.num_workers == 0
    _same(_batches(flat), _batches(value))
    dali = data.loader(DaliBackend(config={"py_num_workers": 0}))
    same = data.loader("dali", config={"py_num_workers": 0})
    assert dali.backend == "dali"
    _same(_batches(dali), _batches(same))


def test_the_state_fingerprint_does_not_depend_on_the_spelling(tiny_data):
    data = tiny_data("image")
    flat = data.loader("torch", sampling="repeated", repeats=2).state_dict()
    value = data.loader("torch", sampling=Sampling(kind="repeated", repeats=2)).state_dict()
    assert flat["fingerprint"] == value["fingerprint"] and flat["order"] == value["order"]


@pytest.mark.parametrize("options,match", [
    (dict(mixup=0.3, mixing=Mixing(mixup=0.2)),
     r"mixup=0\.3 and mixing=Mixing\(mixup=0\.2.*disagree \(mixing\.mixup is 0\.2\)"),
    (dict(cutmix=1.0, mixing=Mixing(mixup=0.2)),  # a group object sets every field
     r"cutmix=1\.0 and mixing=Mixing.*disagree \(mixing\.cutmix is 0\.0\)"),
    (dict(erasing_scale=(0.1, 0.2), erasing={"scale": (0.1, 0.3)}),
     r"erasing_scale=\(0\.1, 0\.2\) and erasing=.*disagree \(erasing\.scale is"),
    (dict(sampling=Sampling(kind="repeated", repeats=2), repeats=4),
     r"make_loader: repeats=4 and sampling=Sampling\(.*disagree \(sampling\.repeats is 2\)"),
    (dict(backend=TorchBackend(num_workers=1), reference={"num_workers": 0}),
     r"reference=\{'num_workers': 0\} and backend=TorchBackend\(.*\(backend\.num_workers "
     r"is 1\)"),
    (dict(backend=DaliBackend(config="exact"), config="throughput"),
     r"config='throughput' and backend=DaliBackend\(config='exact'\) disagree"),
    (dict(backend=DaliBackend(), reference={"num_workers": 0}),
     r"reference=.*no effect with backend='dali'"),
])
def test_a_shorthand_disagreeing_with_its_group_is_refused(tiny_data, options, match):
    with pytest.raises(ValueError, match=match):
        make_loader("image", tiny_data("image").one, **options)


def test_agreeing_shorthand_and_group_are_accepted(tiny_data):
    loader = make_loader("image", tiny_data("image").one, batch_size=4, size=16,
                         mixup=0.2, mixing={"mixup": 0.2}, repeats=2,
                         sampling=Sampling(kind="repeated", repeats=2))
    assert len(loader) == 3


@pytest.mark.parametrize("given,hint", [
    ({"min_per_sorce": 2}, r"min_per_sorce: did you mean min_per_source\?"),
    ({"shard_windw": 2}, r"shard_windw: did you mean shard_window\?"),
    ({"refrence": {}}, r"refrence: did you mean reference\?"),
    ({"mixng": {"mixup": 0.2}}, r"mixng: did you mean mixing\?"),
    ({"mixing": {"mixpu": 0.2}}, r"mixing: Mixing has no field 'mixpu'; did you mean mixup\?"),
    ({"reference": {"num_worker": 0}, "backend": "torch"},
     r"reference: ReferenceOptions has no field 'num_worker'; did you mean num_workers\?"),
])
def test_a_misspelt_shorthand_or_field_gets_the_likely_meaning(image_folder, given, hint):
    with pytest.raises(ValueError, match=hint):
        make_loader("image", image_folder, **given)


@pytest.mark.parametrize("option,value", [("repeats", "2"), ("order", 1),
                                          ("shard_window", 1.5), ("mixup", "0.2"),
                                          ("sampling", 5), ("backend", {"config": None})])
def test_shorthands_are_type_checked(image_folder, option, value):
    with pytest.raises(TypeError, match=rf"option {option}="):
        make_loader("image", image_folder, **{option: value})


def test_sampling_values_are_checked_when_made():
    with pytest.raises(ValueError, match=r"repeats=2 applies only with sampling='repeated'"):
        Sampling(repeats=2)
    with pytest.raises(ValueError, match=r"shard_window=3 applies only with order='shards'"):
        Sampling(shard_window=3)
    with pytest.raises(ValueError, match=r"sampling must be 'uniform' or"):
        Sampling(kind="balanced")  # type: ignore[arg-type]


def test_a_preset_fills_what_a_dict_leaves_but_not_what_a_group_sets(image_folder):
    spec = registry.get("image")

    def recipe(**options) -> ImageRecipe:
        return spec.create(image_folder, seed=0, device="cpu",
                           options={"recipe": "timm-rand-m9", **options}).recipe

    assert recipe().mixing.cutmix == 1.0
    assert recipe(mixing={"mixup": 0.2}).mixing == recipe(mixup=0.2).mixing
    assert recipe(mixing={"mixup": 0.2}).mixing.cutmix == 1.0  # the preset's
    assert recipe(mixing=Mixing(mixup=0.2)).mixing.cutmix == 0.0  # the group's


def test_detection_crop_group_and_shorthands(tiny_data):
    flat = detection_options(size=32, scale_jitter=(0.5, 2.0), hflip=0.0)
    assert flat == detection_options(size=32, crop={"scale_jitter": (0.5, 2.0), "hflip": 0})
    assert flat == detection_options(size=32, crop=DetectionCrop(scale_jitter=(0.5, 2.0),
                                                                 hflip=0.0))
    data = tiny_data("detection")
    _same(_batches(data.loader("torch", scale=(0.5, 1.0), hflip=1.0)),
          _batches(data.loader("torch", crop=DetectionCrop(scale=(0.5, 1.0), hflip=1.0))))
    with pytest.raises(ValueError, match=r"hflip=0\.5 and crop=.*disagree"):
        data.loader("torch", hflip=0.5, crop={"hflip": 1.0})


def test_toml_files_take_group_tables(tmp_path):
    flat, table = tmp_path / "flat.toml", tmp_path / "table.toml"
    flat.write_text("mixup = 0.2\ncutmix = 1.0\nhw_decoder_load = 0.9\n")
    table.write_text("[mixing]\nmixup = 0.2\ncutmix = 1.0\n")
    assert load_recipe(table, train=True) == {"mixup": 0.2, "cutmix": 1.0}
    assert load_config({"gpu_decode": {"hw_decoder_load": 0.9}}) == \
        load_config({"hw_decoder_load": 0.9})
    bad = tmp_path / "bad.toml"
    bad.write_text("mixup = 0.3\n[mixing]\nmixup = 0.2\n")
    with pytest.raises(ValueError, match=r"bad\.toml: mixup=0\.3 and mixing=.*disagree"):
        load_recipe(bad, train=True)
