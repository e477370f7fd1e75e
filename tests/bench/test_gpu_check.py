"""bench/gpu_check.py --dry: the GPU check script runs end to end on the CPU, where each
DALI-vs-DALI comparison must be exact and DALI vs the torch path within its tolerance."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_passes_and_reports(tmp_path):
    run = subprocess.run([sys.executable, "bench/gpu_check.py", "--dry", "--out",
                          str(tmp_path / "out"), "--work", str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert run.returncode == 0, (report["failed"], run.stdout[-3000:])
    assert report["dry"] is True and report["device"] == "cpu" and report["failed"] == []
    by_name = {r["name"]: r for r in report["checks"]}
    for name in ("image preset=throughput train=True", "video VP9 pad=variable",
                 "frame folders pad=variable", "fusion pad=repeat_last",
                 "hyperspectral normalize=True", "adapter dali_from_dataset",
                 "resume from state_dict", "held batches unchanged across epochs"):
        result = by_name[name]["result"]
        assert by_name[name]["status"] == "pass"
        pixels = next(k for k in result if k.endswith("_mean_abs")) if "batches" in result \
            and name != "held batches unchanged across epochs" else None
        if pixels:
            assert result[pixels] == 0.0 and result["batches"] >= 1  # DALI CPU == DALI CPU
    torch_path = by_name["image: DALI vs the torch path"]["result"]
    # on the CPU the decoders agree (exact IDCT) and the fused resize has torchvision's
    # weights: the same pixels but for rare rounding ties (0.0 on this machine)
    assert torch_path["image_mean_abs"] <= min(0.01, torch_path["tolerance"])
    routed = by_name["clips NVDEC cannot take are routed, not blamed"]["result"]
    assert routed["vp9_160x120"]["decoder"] == "dali_cpu"
    assert by_name["busy consumer stream and side stream"]["status"] == "skip"
    assert set(by_name["images/s per preset"]["result"]["images_per_s"]) == {
        "default", "throughput", "low_memory", "exact"}
    text = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert "0 failed" in text and "video H.264" in text
