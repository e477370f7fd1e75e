"""The modality registry: the one place a modality is named, read by make_loader, the bench
scripts and the fixtures; option checking; the engine's check of feeds against the graph."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from bench import compare, run_one
from torch_bridge import make_loader, registry
from torch_bridge.modalities.image import ImageModality


def test_names_and_kinds():
    assert registry.names() == ("image", "video", "hyperspectral", "fusion", "detection",
                                "arrays")
    assert set(registry.KINDS) == {"image", "video", "frames", "hyperspectral", "fusion",
                                   "detection", "arrays"}
    assert registry.KINDS["frames"][0] is registry.get("video")
    with pytest.raises(ValueError,
                       match=r"'audio'.*image, video, hyperspectral, fusion, detection, arrays"):
        registry.get("audio")


def test_options_come_from_the_constructors_and_option_groups():
    image = registry.get("image").options()
    assert image["size"] == (224, 224) and image["train"] is True and image["mixup"] == 0.0
    assert image["max_pixels"] == 89_478_485 and image["image_column"] is None
    assert image["storage_options"] is None and image["cache_limit"] is None
    assert image["alpha"] == "drop" and image["recipe"] is None
    # each image option's default is written once: in the field of its option group
    from dali_pipes.recipes import Crop
    assert image["hflip"] == Crop.hflip and "schedule" not in image
    assert "crop" not in image and registry.get("image").groups()["crop"] is Crop
    video = registry.get("video").options()
    assert video["clip_length"] == 8 and video["pad"] == "repeat_last"
    fusion = registry.get("fusion").options()
    assert set(video) < set(fusion) and fusion["imu_method"] == "linear"
    assert "device" not in registry.get("hyperspectral").options()


def test_video_kind_is_chosen_from_the_data(tiny_data):
    spec = registry.get("video")
    assert spec.kind_for(tiny_data("frames").one).name == "frames"
    assert spec.kind_for(tiny_data("video").one).name == "video"


def test_unknown_option_names_it_and_lists_the_valid_ones(image_folder):
    with pytest.raises(ValueError, match=r"unknown option clip_length for modality 'image': "
                                         r"clip_length: no option of that name\. The image "
                                         r"options: size, train, scale, .*max_pixels"):
        make_loader("image", image_folder, clip_length=4)
    with pytest.raises(ValueError, match=r"unknown options sise, trian .*'video': sise: did "
                                         r"you mean size\?; trian: did you mean train\?"):
        make_loader("video", image_folder, sise=3, trian=False)


@pytest.mark.parametrize("given,hint", [
    ("batchsize", r"batchsize: did you mean batch_size\?"),
    ("bacth_size", r"did you mean batch_size\?"),
    ("shufle", r"did you mean shuffle\?"),
    ("num_workers", r"num_workers is a DataLoader option of the torch backend: pass "
                    r"reference=\{'num_workers': \.\.\.\} with backend='torch'"),
    ("py_num_workers", r"py_num_workers is a DALI pipeline option: pass "
                       r"config=\{'py_num_workers': \.\.\.\}"),
    ("pin_memroy", r"did you mean pin_memory \(in reference=\{\.\.\.\}\)\?"),
])
def test_a_misspelt_or_misplaced_option_gets_the_likely_meaning(image_folder, given, hint):
    with pytest.raises(ValueError, match=hint) as info:
        make_loader("image", image_folder, **{given: 4})
    assert len(str(info.value)) < 700  # the names, not every option with its default


def test_options_of_the_other_backend_are_refused(image_folder):
    with pytest.raises(ValueError, match=r"config=.*no effect with backend='torch'"):
        make_loader("image", image_folder, backend="torch", config="throughput")
    with pytest.raises(ValueError, match=r"reference=.*no effect with backend='dali'"):
        make_loader("image", image_folder, backend="dali", reference={"num_workers": 0})


def test_bench_choices_and_sample_makers_come_from_the_registry():
    assert compare.parse_args(["--modality", "fusion"]).modality == "fusion"
    with pytest.raises(SystemExit):
        compare.parse_args(["--modality", "audio"])
    for parse in (run_one.loader_parser("x").parse_args,
                  lambda a: run_one.parser().parse_args(a + ["--backend", "dali", "--data", "."])):
        assert parse(["--modality", "video"]).modality == "video"
    for spec in registry.REGISTRY.values():
        assert callable(spec.sample_maker()) and spec.sample_note
        assert len(spec.sample_note) <= 38  # its progress line fits 80 columns


def test_reading_the_registry_imports_no_source_until_a_schema_is_asked_for():
    code = ("import sys; from torch_bridge import registry; registry.names(); "
            "before = sorted(m for m in sys.modules if m.startswith('dali_pipes.sources')); "
            "registry.get('arrays').batch_schema; "
            "print(before, 'dali_pipes.sources.arrays' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[] True"


def test_reading_the_registry_imports_neither_torch_nor_dali():
    code = ("import sys; from torch_bridge import registry; registry.names(); "
            "print(sorted(m for m in ('torch', 'nvidia.dali') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_padded_fields_come_from_the_schema():
    def time_fields(name):
        return registry.get(name).batch_schema.time_fields()
    assert time_fields("video") == ("frames", "timestamps")
    assert time_fields("fusion") == ("frames", "timestamps", "imu", "imu_valid")
    assert time_fields("image") == time_fields("hyperspectral") == ()


class _MissingMirror(ImageModality):
    def feeds(self, epoch, indices, guard, keys=None):
        feeds, kept = super().feeds(epoch, indices, guard, keys)
        feeds.pop("mirror", None)
        feeds["flip"] = np.zeros(len(kept), np.int32)
        return feeds, kept


def test_feeds_that_miss_a_graph_input_fail_naming_it(image_folder, monkeypatch):
    spec = registry.get("image")
    kind = dataclasses.replace(spec.kinds[0], cls=f"{__name__}:_MissingMirror")
    monkeypatch.setitem(registry.REGISTRY, "image", dataclasses.replace(spec, kinds=(kind,)))
    loader = make_loader("image", image_folder, batch_size=4, size=16)
    with pytest.raises(ValueError, match=r"_MissingMirror\.feeds\(\) does not match.*"
                                         r"missing \['mirror'\], not in the graph \['flip'\]"):
        next(iter(loader))
