"""Option values of the wrong type fail when the loader is made, naming the option; the
ImageFolder attributes (classes, class_to_idx, path) match torchvision's ImageFolder."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pytest
import torchvision

from torch_bridge import make_loader
from torch_bridge._option_types import OptionTypeError, annotations_of, check_options

BAD_LOADER_OPTIONS = [("train", "False"), ("size", "224"), ("size", 224.0),
                      ("batch_size", 2.0), ("batch_size", "8"), ("shuffle", "no"),
                      ("shuffle", 1), ("seed", None), ("seed", 1.5), ("drop_last", "yes"),
                      ("rank", "0"), ("world_size", 2.0), ("max_pixels", "1000"),
                      ("on_error", True), ("backend", 1), ("min_per_source", "2")]


@pytest.mark.parametrize(("option", "value"), BAD_LOADER_OPTIONS)
def test_image_options_of_the_wrong_type(image_folder, option, value):
    with pytest.raises(TypeError, match=rf"option {option}=") as info:
        make_loader("image", image_folder, **{option: value})
    assert isinstance(info.value, ValueError)  # callers catching ValueError keep working


@pytest.mark.parametrize(("modality", "option", "value"), [
    ("video", "clip_length", "8"), ("video", "train", "False"), ("video", "pad", 0),
    ("video", "stride", 1.0), ("hyperspectral", "patch_size", "9"),
    ("hyperspectral", "normalize", "True"), ("fusion", "imu_offset", "0.25"),
    ("fusion", "imu_method", 1), ("fusion", "clips_per_video", None)])
def test_other_modalities_options(tmp_path, modality, option, value):
    """Checked before the data is opened: no data set needed."""
    with pytest.raises(TypeError, match=rf"make_loader\('{modality}'\): option {option}="):
        make_loader(modality, tmp_path, **{option: value})


def test_values_of_the_right_type_pass(image_folder):
    loader = make_loader("image", image_folder, batch_size=np.int64(8), seed=np.int32(3),
                         shuffle=np.bool_(False), size=16, train=False, max_pixels=None,
                         device="cpu")
    assert len(loader) == 5  # 37 images


def test_check_options_rules():
    def f(*, a: int = 0, b: float = 0.0, c: int | None = None,
          d: Literal["x", "y"] = "x", e: tuple[int, int] = (1, 1), g=False, h=3) -> None:
        """A function with options of each kind."""

    assert annotations_of(f)["g"] is bool and "h" not in annotations_of(f)
    check_options(f, dict(a=1, b=2, c=None, d="z", e="anything", h="x"))  # d: a str
    for name, value in (("a", True), ("b", "1"), ("c", 1.0), ("d", 1), ("g", 0)):
        with pytest.raises(OptionTypeError, match=f"option {name}="):
            check_options(f, {name: value})


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_imagefolder_attributes(image_folder: Path, backend):
    ref = torchvision.datasets.ImageFolder(str(image_folder))
    loader = make_loader("image", image_folder, backend=backend, batch_size=8, size=16,
                         reference={"num_workers": 0} if backend == "torch" else None)
    assert loader.classes == ref.classes
    assert loader.class_to_idx == ref.class_to_idx
    files = {path: label for path, label in ref.samples}
    batch = next(iter(loader))
    for index, label in zip(batch["index"].tolist(), batch["label"].tolist(), strict=True):
        assert files[loader.path(index)] == label
    assert [loader.path(i) for i in range(len(ref))] == [p for p, _ in ref.samples]
