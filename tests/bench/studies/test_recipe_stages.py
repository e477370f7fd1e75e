"""bench/studies/recipe_stages.py: every configuration is a valid recipe file, and a run writes
one row per configuration with both backends measured."""
import json
import subprocess
import sys
from pathlib import Path

from bench.studies.recipe_stages import CONFIGS, toml_text, write_recipes
from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.files import load_recipe, tomllib
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[3]


def test_every_configuration_is_a_valid_recipe_file(tmp_path):
    paths = write_recipes(tmp_path, list(CONFIGS))
    for name, path in paths.items():
        assert tomllib.loads(path.read_text()) == CONFIGS[name], name
        recipe = image_recipe(**load_recipe(path, train=True))
        assert (recipe.policy.auto_augment is not None) == ("auto_augment" in CONFIGS[name])
    timm = image_recipe(**load_recipe("timm-rand-m9", train=True))
    assert image_recipe(**load_recipe(paths["timm-rand-m9"], train=True)) == timm


def test_toml_text_quotes_strings_and_lists():
    assert toml_text({"a": "x", "b": [0.4, 0.4], "c": 2}) == 'a = "x"\nb = [0.4, 0.4]\nc = 2\n'


def test_a_short_run_measures_both_backends(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "s.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "studies" / "recipe_stages.py"), "--data", str(data),
         "--batch-size", "8", "--steps", "1", "--warmup", "0", "--repeats", "1",
         "--workers", "0", "--only", "+ erasing", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["config"] for r in rows] == ["+ erasing"]
    assert rows[0]["dali"]["images_per_s"] > 0 and rows[0]["torch"]["images_per_s"] > 0
    assert "| + erasing |" in proc.stdout
