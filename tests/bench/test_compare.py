"""compare.py end to end on a tiny data set: the JSON it writes follows docs/design.md."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def test_compare_writes_contract_json(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=24, n_classes=2)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--batch-size", "8", "--steps", "3", "--warmup", "1", "--size", "32",
         "--device", "cpu", "--backends", "dali,torch,classic,dali-stock", "--repeats", "1",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["modality"] == "image" and report["device"] == "cpu"
    assert [r["backend"] for r in report["results"]] == ["dali", "torch", "classic",
                                                         "dali-stock"]
    for r in report["results"]:
        for key in ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "cpu_percent",
                    "peak_rss_mb"):
            assert r[key] > 0, (r["backend"], key)
        assert r["gpu_util_percent"] is None
        assert r["wait_ms_p95"] >= r["wait_ms_p50"]
    rates = {r["backend"]: r["samples_per_s"] for r in report["results"]}
    assert report["speedup"] == pytest.approx(rates["dali"] / rates["torch"])
    assert set(report["ratios"]) == {"dali/torch", "dali/classic", "dali/dali-stock"}
    assert "torch" in report["env"] and "dali" in report["env"]
    assert "samples/s" in proc.stdout


def test_compare_reports_a_failing_backend(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(tmp_path / "none"),
         "--steps", "1", "--device", "cpu", "--backends", "dali"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "does not exist" in proc.stderr


def test_compare_hyperspectral(tmp_path):
    from dali_pipes.testing.sample_hyperspectral import small_scene_folder
    small_scene_folder(tmp_path / "scenes")
    out = tmp_path / "h.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--modality", "hyperspectral",
         "--data", str(tmp_path / "scenes"), "--batch-size", "16", "--steps", "3",
         "--warmup", "1", "--device", "cpu", "--repeats", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [r["backend"] for r in report["results"]] == ["dali", "torch"]
    assert report["speedup"] > 0 and all(r["samples_per_s"] > 0 for r in report["results"])
