"""compare.py --recipe: the recipe on dali, torch and the usual torchvision baseline, the
rows and speedups in the table and the JSON, a clean error for an unknown recipe."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.baselines import Mixup, usual_loader
from bench.compare import check_recipe, recipe_speedups
from tests.conftest import bounded, write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def test_compare_recipe_runs_three_rows(tmp_path, capsys):
    """compare.py's main in this process (each row still a process of its own, forked from
    the server this pytest process shares between such runs); the test below runs the
    script from the command line."""
    from bench import compare
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "r.json"
    with bounded(300):  # a hang fails the test
        code = compare.main(
            ["--recipe", "timm-rand-m9", "--data", str(data), "--batch-size", "8", "--steps", "1",
             "--warmup", "0", "--size", "32", "--device", "cpu", "--repeats", "1", "--workers",
             "0", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    report = json.loads(out.read_text())
    assert [r["backend"] for r in report["results"]] == ["dali", "torch", "usual"]
    assert all(r["samples_per_s"] > 0 and r["cpu_ms_per_sample"] > 0
               for r in report["results"])
    rate = {r["backend"]: r["samples_per_s"] for r in report["results"]}
    assert report["recipe"] == report["settings"]["recipe"] == "timm-rand-m9"
    assert report["recipe_speedups"]["vs torch"] == pytest.approx(rate["dali"] / rate["torch"])
    assert report["recipe_speedups"]["vs usual"] == pytest.approx(rate["dali"] / rate["usual"])
    for key in ("modality", "device", "results", "speedup", "env"):  # the schema, kept
        assert key in report, key
    assert report["speedup"] == pytest.approx(rate["dali"] / rate["torch"])
    assert "usual" in printed.out and "vs usual" in printed.out


def test_unknown_recipe_is_a_clean_error_listing_the_presets(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--recipe", "timm-rand-m99",
         "--data", str(tmp_path), "--device", "cpu"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "--recipe timm-rand-m99" in proc.stderr
    for name in ("timm-rand-m9", "torchvision-v2", "ffcv-rn50"):
        assert name in proc.stderr


def test_check_recipe_takes_a_toml_path_and_names_a_bad_key(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text('auto_augment = "trivialaugment"\nmixup = 0.2\n')
    check_recipe(str(good), "image")
    bad = tmp_path / "bad.toml"
    bad.write_text("mixupp = 0.2\n")
    with pytest.raises(SystemExit, match="mixupp"):
        check_recipe(str(bad), "image")
    with pytest.raises(SystemExit, match="only for --modality image"):
        check_recipe(str(good), "video")


def test_recipe_speedups_leave_out_a_failed_row():
    rows = [{"backend": "dali", "samples_per_s": 300.0},
            {"backend": "torch", "samples_per_s": 100.0},
            {"backend": "usual", "error": "OSError: x"}]
    assert recipe_speedups(rows) == {"vs torch": 3.0, "vs usual": None}


def test_usual_loader_follows_the_recipe_file(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=8, n_classes=2)
    recipe = tmp_path / "r.toml"
    recipe.write_text('size = 24\nauto_augment = "randaugment"\nerasing = 0.5\n'
                      'erasing_value = "random"\ncutmix = 1.0\nmixup = 0.8\n'
                      'label_smoothing = 0.1\ndtype = "float16"\n'
                      'memory_format = "channels_last"\n')
    batch = next(iter(usual_loader(data, recipe=str(recipe), batch_size=4, num_workers=0)))
    assert batch["image"].shape == (4, 3, 24, 24) and batch["image"].dtype == torch.float16
    assert batch["image"].is_contiguous(memory_format=torch.channels_last)
    assert batch["target"].shape == (4, 2)
    torch.testing.assert_close(batch["target"].sum(1), torch.ones(4))


def test_mixup_baseline_mixes_with_the_flipped_batch():
    images = torch.arange(4, dtype=torch.float32).view(4, 1, 1, 1).expand(4, 3, 10, 10)
    mix = Mixup(mixup_alpha=0.0, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5,
                label_smoothing=0.0, num_classes=4, seed=3)
    out, target = mix(images.contiguous(), torch.arange(4))
    pasted = (out[0] == 3).float().mean().item()  # row 0's partner is row 3
    assert 0 < pasted < 1
    assert target[0, 0].item() == pytest.approx(1 - pasted)
    assert target[0, 3].item() == pytest.approx(pasted)
    plain = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0, prob=1.0, switch_prob=0.5,
                  label_smoothing=0.1, num_classes=4, seed=0)
    x = torch.rand(4, 3, 5, 5)
    out, target = plain(x.clone(), torch.arange(4))
    lam = (target[0, 0].item() - 0.025) / 0.9  # own class: lam * 0.925 + (1 - lam) * 0.025
    assert 0 < lam < 1
    torch.testing.assert_close(out, lam * x + (1 - lam) * x.flip(0))
    torch.testing.assert_close(target.sum(1), torch.ones(4))
