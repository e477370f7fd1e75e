"""examples/train_classifier.py trains a few steps on CPU and resumes exactly, and runs
under torchrun with two ranks (smoke tests)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[3] / "examples" / "train_classifier.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_classifier", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_progress_lines_and_help(image_folder, tmp_path, capsys):
    """One line per --log-every steps with the epoch, the batch of the epoch and the loss,
    then one when the epoch ends; --help gives every option with its default."""
    example = _example()
    example.main([str(image_folder), "--size", "32", "--batch-size", "8", "--device", "cpu",
                  "--checkpoint", str(tmp_path / "c.pt"), "--log-every", "1", "--epochs", "1",
                  "--model", "resnet18"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("epoch 0 batch 1/") and "samples/s" in lines[0]
    assert lines[-1].startswith("epoch 0 done: loss")
    with pytest.raises(SystemExit):
        example.parse(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "any recipe preset." in text and "(default: 64)" in text


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


def test_ddp_under_torchrun(image_folder, tmp_path):
    """Two ranks under torchrun (gloo on the CPU): each trains on its own share of every
    batch of the plan, DDP keeps one model, rank 0 checkpoints the loader at the global
    position (2 steps of 2 ranks x 4 samples)."""
    import os
    import subprocess
    import sys

    import torch

    ckpt = tmp_path / "ddp.pt"
    root = _PATH.parents[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", str(_PATH), str(image_folder), "--backend", "dali", "--recipe",
           "timm-rand-m9", "--size", "32", "--batch-size", "4", "--device", "cpu",
           "--steps", "2", "--checkpoint", str(ckpt), "--lr", "0.01", "--log-every", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=root, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "epoch 0 batch 2/" in run.stdout
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["step"] == 2
    loader = state["loader"]
    assert (loader["world_size"], loader["batch_size"], loader["batches_consumed"]) == (2, 4, 2)
    assert loader["num_batches"] == 37 // (2 * 4)  # each rank's share, drop_last
