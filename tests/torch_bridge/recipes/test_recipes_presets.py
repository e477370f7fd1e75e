"""Recipe presets (issue 12 item 8): the shipped TOMLs load, set the same parameters on both
backends, resume exactly; a user's TOML works; unknown keys and bad values are rejected."""
from __future__ import annotations

import re

import pytest
import torch

from dali_pipes.recipes.files import RECIPE_DIR, available_recipes, load_recipe
from torch_bridge import make_loader


def _loader(folder, backend, **kw):
    kw = {"batch_size": 8, "seed": 6, **kw}
    if backend == "torch":
        kw["reference"] = {"num_workers": 0}
    return make_loader("image", folder, backend=backend, **kw)


def _copies(batches):
    return [{k: v.clone() for k, v in b.items()} for b in batches]


def test_presets_are_shipped_and_every_key_is_commented():
    assert available_recipes() == ["ffcv-rn50", "timm-rand-m9", "torchvision-v2"]
    for path in RECIPE_DIR.glob("*.toml"):
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith(("#", "description")):
                assert "#" in line, f"{path.name}: undocumented key: {line}"


@pytest.mark.parametrize("name", ["torchvision-v2", "timm-rand-m9", "ffcv-rn50"])
def test_preset_parameters_identical_on_both_backends(image_folder, name):
    """The same crops, policies, erasing, mixing: targets equal exactly, pixels close."""
    kw = dict(recipe=name, size=32, drop_last=True)
    dali, ref = _copies(_loader(image_folder, "dali", **kw)), _copies(_loader(image_folder,
                                                                             "torch", **kw))
    assert len(dali) == len(ref) == 4
    for a, b in zip(dali, ref, strict=True):
        assert a.keys() == b.keys() and "target" in a
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["target"], b["target"])
        assert a["image"].dtype == b["image"].dtype and a["image"].shape == (8, 3, 32, 32)
        diff = (a["image"].float() - b["image"].float()).abs().mean()
        assert diff < 0.1, diff


def test_preset_resumes_mid_epoch(image_folder):
    kw = dict(recipe="timm-rand-m9", size=32)
    want = _copies(_loader(image_folder, "dali", **kw))
    first = _loader(image_folder, "dali", **kw)
    it = iter(first)
    got = _copies([next(it) for _ in range(2)])
    resumed = _loader(image_folder, "dali", **kw)
    resumed.load_state_dict(first.state_dict())
    got += _copies(resumed)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert all(torch.equal(g[k], w[k]) for k in w)


def test_eval_loader_takes_the_eval_table(image_folder):
    opts = load_recipe("torchvision-v2", train=False)
    assert opts == {"size": 224, "crop_pct": 0.9655, "interpolation": "bilinear"}
    batch = next(iter(_loader(image_folder, "dali", recipe="ffcv-rn50", train=False,
                              shuffle=False)))
    assert "target" not in batch and batch["image"].shape == (8, 3, 224, 224)
    assert batch["image"].dtype == torch.float16
    assert batch["image"].is_contiguous(memory_format=torch.channels_last)


def test_explicit_options_win_over_the_preset(image_folder):
    """An option given to make_loader wins over the preset's value."""
    batch = next(iter(_loader(image_folder, "torch", recipe="ffcv-rn50", size=24,
                              dtype="bfloat16")))
    assert batch["image"].dtype == torch.bfloat16 and batch["image"].shape[-1] == 24
    assert batch["image"].is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_an_option_given_at_its_default_wins_over_the_preset(image_folder, backend):
    """timm-rand-m9 sets mixup, cutmix and label smoothing (a soft "target"); given at
    their defaults they are off, as asked, on both backends."""
    mixed = next(iter(_loader(image_folder, backend, recipe="timm-rand-m9", size=24)))
    plain = next(iter(_loader(image_folder, backend, recipe="timm-rand-m9", size=24,
                              mixup=0.0, cutmix=0.0, label_smoothing=0.0)))
    assert "target" in mixed and "target" not in plain


def test_user_toml(image_folder, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('size = 24\nmixup = 0.5\nratio = [0.5, 2.0]\n[eval]\nsize = 20\n')
    batch = next(iter(_loader(image_folder, "torch", recipe=str(path))))
    assert batch["image"].shape == (8, 3, 24, 24) and batch["target"].shape == (8, 3)


@pytest.mark.parametrize("text, words", [
    ("size = 24\nmixpu = 0.5\n", "unknown key(s) ['mixpu']; known keys: auto_augment"),
    ("[eval]\nflip = 1\n", "[eval]: unknown key(s) ['flip']"),
    ("magnitude = 40\n", "magnitude=40"), ("size = [\n", "not valid TOML")])
def test_bad_user_toml(image_folder, tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(words)) as info:
        _loader(image_folder, "dali", recipe=str(path))
    assert str(path) in str(info.value)


def test_unknown_preset_lists_the_presets(image_folder):
    with pytest.raises(ValueError, match="recipe='timm-rand-m7' is unknown: expected one of "
                                         "ffcv-rn50, timm-rand-m9, torchvision-v2"):
        _loader(image_folder, "dali", recipe="timm-rand-m7")
