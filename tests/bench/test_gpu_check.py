"""bench/gpu_check.py --dry: the GPU check script runs end to end on the CPU, where each
DALI-vs-DALI comparison must be exact and DALI vs the torch path within its tolerance; a
rerun with the same --work folder reuses its data and passes. One dry run serves both tests."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gpu_check(argv: list[str]) -> subprocess.CompletedProcess:
    """bench/gpu_check.py's main in this process, which has imported torch and DALI already
    (the subprocesses of its checks are still started; test_gpu_report.py starts the script
    from the command line): its exit status and what it printed."""
    from bench import gpu_check
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = gpu_check.main(argv)
    return subprocess.CompletedProcess(["bench/gpu_check.py", *argv], code,
                                       printed.getvalue(), "")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The whole dry run once: (its exit status and output, the folder of its --out and
    --work)."""
    tmp_path = tmp_path_factory.mktemp("gpu_check")
    return _gpu_check(["--dry", "--out", str(tmp_path / "out"), "--work",
                       str(tmp_path / "data"), "--deadline", "300"]), tmp_path


def test_dry_run_passes_and_reports(dry_run):
    run, tmp_path = dry_run
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
    compared = by_name["compare.py images, JPEG engine used"]["result"]["results"]
    assert [r["backend"] for r in compared] == ["dali"] and compared[0]["samples_per_s"] > 0
    text = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert "0 failed" in text and "video H.264" in text and report["not_run"] == []


def test_a_rerun_with_the_same_work_folder_passes(dry_run, tmp_path):
    """The dry run made every check's data in its --work folder; a second run there (the
    checks of one data set) reuses that data and passes."""
    first, work = dry_run
    assert first.returncode == 0, first.stdout[-2000:]
    made = {p.name: p.stat().st_mtime_ns for p in (work / "data").iterdir()}
    assert ".rgba.done" in made  # the alpha check's data, marked finished
    run = _gpu_check(["--dry", "--only", "alpha", "--work", str(work / "data"), "--out",
                      str(tmp_path / "out"), "--deadline", "240"])
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert run.returncode == 0, (report["failed"], run.stdout[-2000:])
    assert [r["status"] for r in report["checks"]] == ["pass"] * 3  # + preflight, env
    # the data reused, not made again (a remade folder gets a new marker)
    assert {p.name: p.stat().st_mtime_ns for p in (work / "data").iterdir()} == made


def test_without_a_gpu_it_says_so_in_one_line_and_points_at_dry():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out",
                          "unused"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "no NVIDIA GPU" in run.stderr and "--dry" in run.stderr
