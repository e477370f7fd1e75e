"""diagnose.py: classify() on hand-made evidence, and two end-to-end runs on small data.

A disk-bound run is tested only through classify(): making one end to end needs cold
caches (dropping the page cache needs root), so it cannot be made reliable in a test.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.diagnose import THRESHOLDS, Evidence, classify
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def _evidence(**changes) -> Evidence:
    base = dict(wait_fraction=0.6, wait_ms_p50=40.0, wait_ms_p95=55.0, compute_ms_p50=20.0,
                cpu_cores=[30.0, 25.0], process_cpu_percent=50.0, disk_device="nvme0n1",
                disk_read_mb_s=20.0, disk_util_percent=10.0)
    return Evidence(**{**base, **changes})


def test_classify_disk_bound_by_utilisation():
    dx = classify(_evidence(disk_util_percent=97.0, disk_read_mb_s=180.0))
    assert dx.bottleneck == "disk"
    assert any("97%" in line for line in dx.evidence)
    assert "cache" in dx.next_step


def test_classify_disk_bound_near_measured_ceiling():
    ev = _evidence(disk_util_percent=40.0, disk_read_mb_s=450.0, disk_ceiling_mb_s=500.0)
    assert classify(ev).bottleneck == "disk"


def test_classify_cpu_bound():
    dx = classify(_evidence(cpu_cores=[97.0, 99.0], process_cpu_percent=190.0))
    assert dx.bottleneck == "cpu"
    assert "GPU" in dx.next_step  # DALI on CPU: decode on the GPU next


def test_classify_cpu_bound_from_the_loader_tree_alone():
    ev = _evidence(cpu_cores=[60.0, 70.0], process_cpu_percent=180.0, backend="torch")
    dx = classify(ev)
    assert dx.bottleneck == "cpu" and "DALI" in dx.next_step


def test_classify_compute_bound_even_with_busy_resources():
    ev = _evidence(wait_fraction=0.03, cpu_cores=[100.0, 100.0], disk_util_percent=95.0)
    dx = classify(ev)
    assert dx.bottleneck == "compute"
    assert "3%" in dx.evidence[0]


def test_classify_transfer_and_balanced():
    assert classify(_evidence(backend="torch")).bottleneck == "transfer"
    assert "num_workers" in classify(_evidence(backend="torch")).next_step
    assert classify(_evidence(wait_fraction=0.15)).bottleneck == "balanced"


def test_classify_without_a_disk_device_says_so():
    dx = classify(_evidence(disk_device=None, disk_util_percent=None, disk_read_mb_s=None))
    assert dx.bottleneck == "transfer"
    assert any("no block device" in line for line in dx.evidence)


def test_thresholds_can_be_overridden():
    ev = _evidence(wait_fraction=0.15)
    assert classify(ev, {"compute_wait": 0.2}).bottleneck == "compute"
    assert THRESHOLDS["compute_wait"] == 0.10


def _diagnose(data: Path, tmp_path: Path, *extra) -> dict:
    out = tmp_path / "dx.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "diagnose.py"), "--data", str(data),
         "--device", "cpu", "--backend", "dali", "--batch-size", "8", "--json", str(out),
         *extra], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bottleneck:" in proc.stdout and "next:" in proc.stdout
    return json.loads(out.read_text())


def test_end_to_end_compute_bound(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    report = _diagnose(data, tmp_path, "--size", "32", "--compute-ms", "200",
                       "--steps", "6", "--warmup", "2")
    assert report["diagnosis"]["bottleneck"] == "compute", report["diagnosis"]
    ev = report["evidence"]
    assert ev["wait_fraction"] < 0.10 and ev["compute_ms_p50"] >= 190
    assert len(report["steps"]["wait_ms"]) == 6 and len(ev["cpu_cores"]) >= 1


def test_end_to_end_cpu_bound(tmp_path):
    """Compute 0, full-size JPEGs decoded and resized on the CPU: every core decodes."""
    data = write_image_folder(tmp_path / "d", n_images=32, n_classes=2, sizes=((375, 500),))
    # Batches of 32 keep the loader's own Python work per image small, as in training.
    report = _diagnose(data, tmp_path, "--compute-ms", "0", "--steps", "30", "--warmup", "2",
                       "--batch-size", "32")
    assert report["diagnosis"]["bottleneck"] == "cpu", report["diagnosis"]
    assert report["evidence"]["wait_fraction"] > 0.9


def test_bad_data_folder_is_reported(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "diagnose.py"), "--data",
         str(tmp_path / "missing"), "--device", "cpu", "--steps", "1"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "does not exist" in proc.stderr


@pytest.mark.parametrize("model", ["tiny-cnn"])
def test_model_step_runs_on_torch_backend(tmp_path, model):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "dx.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "diagnose.py"), "--data", str(data),
         "--device", "cpu", "--backend", "torch", "--workers", "1", "--model", model,
         "--size", "32", "--batch-size", "8", "--steps", "3", "--warmup", "1",
         "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ev = json.loads(out.read_text())["evidence"]
    assert ev["transfer_mb_s"] > 0 and ev["compute_ms_p50"] > 0
