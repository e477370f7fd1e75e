"""examples/train_classifier.py trains a few steps on CPU and resumes exactly (issue 12
item 10, smoke test)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "examples" / "train_classifier.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_classifier", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trains_and_resumes(image_folder, tmp_path, backend="dali"):
    """A few steps of timm-rand-m9 training, then the same run stopped after 1 step and
    resumed from its checkpoint: the same losses (same batches, mixing and weights)."""
    example = _example()
    ckpt = str(tmp_path / "ckpt.pt")
    common = [str(image_folder), "--backend", backend, "--recipe", "timm-rand-m9",
              "--size", "32", "--batch-size", "8", "--device", "cpu", "--checkpoint", ckpt,
              "--lr", "0.01"]
    full = example.main(common + ["--steps", "3", "--checkpoint", str(tmp_path / "a.pt")])
    assert len(full) == 3 and all(loss == loss for loss in full)  # finite, not NaN
    first = example.main(common + ["--steps", "1"])
    rest = example.main(common + ["--steps", "3", "--resume"])
    assert first == full[:1]
    assert rest == pytest.approx(full[1:], rel=1e-4)
