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
    for preset in ("default", "exact"):
        torch_path = by_name[f"image preset={preset}: DALI vs the torch path"]["result"]
        # on the CPU the decoders agree (exact IDCT) and the fused resize has torchvision's
        # weights: the same pixels but for rare rounding ties (0.0 on this machine)
        assert torch_path["tolerance"] == 0.05 and torch_path["image_mean_abs"] <= 0.01
    decoders = by_name["decoder of each clip (NVDEC, not PyAV)"]["result"]
    vp9 = decoders["libvpx-vp9"]
    # the CPU graph's decoder, no PyAV (the count includes the clips read ahead)
    assert set(vp9["decodes"]) == {"dali_cpu"} and vp9["decodes"]["dali_cpu"] >= vp9["clips"]
    stages = by_name["feed / graph / hand-over ms, GPU and CPU use"]["result"]
    assert stages["graph_ms"] > 0 and stages["process_cpu_percent"] > 0
    for name in ("image hue, grayscale, blur, autoaugment", "image dtypes with channels_last",
                 "image large photos", "NVJPG for full-image and ROI decoding"):
        assert by_name[name]["status"] == "pass", by_name[name]
    routed = by_name["clips NVDEC cannot take are routed, not blamed"]["result"]
    assert routed["vp9_160x120"]["decoder"] == "dali_cpu"
    assert by_name["busy consumer stream and side stream"]["status"] == "skip"
    rates = by_name["throughput: images/s and clips/s"]["result"]["images_per_s"]
    assert set(rates["built-in"]) == {"dali default", "dali throughput", "dali low_memory",
                                      "dali exact", "dali cpu default", "torch"}
    assert all(v > 0 for v in rates["clips_per_s"].values())
    text = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert "0 failed" in text and "video H.264" in text and report["not_run"] == []
