"""bench/studies/agreement.py: the four figures per case from a real run of both backends,
figures that show a difference when there is one, and a result file covering every case."""
import json
from pathlib import Path

import numpy as np

from bench.studies.agreement import case_names, figures, main, markdown_table, where
from dali_pipes.sample_data.tiny_data import write_image_folder

ROOT = Path(__file__).resolve().parents[3]
CASES = ["hue 0.1", "Rotate -135 (fused)", "Solarize 0.5 (dali-ops)"]


def _check(case: dict) -> None:
    assert case["max"] >= case["p99"] >= 0 and case["mean"] >= 0
    assert 0 <= case["fraction"] <= 1
    assert (case["max"] > 0) == (case["fraction"] > 0) == bool(case["where"])


def test_a_tiny_run_writes_the_four_figures_per_case(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=4, n_classes=2,
                              sizes=((60, 80), (80, 60)))
    out = tmp_path / "agreement.json"
    assert main(["--data", str(data), "--images", "4", "--size", "24", "--only",
                 ",".join(CASES), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report["cases"]) == CASES
    for case in report["cases"].values():
        _check(case)
    assert report["env"]["dali"] and report["command"].startswith("python bench/studies/")


def test_a_difference_shows_in_every_figure_and_in_the_table():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(2, 8, 8, 3)).astype(np.float64)
    same = figures(a, a.copy())
    assert same == {"mean": 0.0, "p99": 0.0, "max": 0.0, "fraction": 0.0}
    assert where(a, a.copy()) == {}
    b = a.copy()
    b[1, 3, 5, 2] += 40  # one value, far off
    b[0, :, :, 0] += 1  # a sixth of the values, one level
    off = figures(a, b)
    assert off["max"] == 40 and off["p99"] >= 1 and abs(off["fraction"] - 65 / a.size) < 1e-9
    assert abs(off["mean"] - (64 * 1 + 40) / a.size) < 1e-9
    w = where(b, a)
    assert w["max_at"] == {"sample": 1, "y": 3, "x": 5, "channel": 2,
                           "dali": b[1, 3, 5, 2], "torch": a[1, 3, 5, 2]}
    assert w["one_level_share"] > 0.9
    table = markdown_table({"perturbed": {**off, "where": w}})
    assert "| perturbed | 0.271 | 1.0 | 40.0 | 16.93% |" in table


def test_the_result_file_covers_every_case():
    report = json.loads((ROOT / "bench" / "results" / "agreement.json").read_text())
    assert list(report["cases"]) == case_names()
    for case in report["cases"].values():
        _check(case)
    doc = (ROOT / "docs" / "agreement.md").read_text()
    assert doc.startswith("# Agreement between the backends")
    assert report["command"] in doc
