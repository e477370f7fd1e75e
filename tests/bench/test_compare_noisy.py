"""compare.py on a noisy machine: drained child output, CPU-ms per sample, spread, load."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import compare
from bench.metrics import LoadMonitor
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def test_child_writing_over_64k_to_stderr_does_not_deadlock(tmp_path):
    """A child that fills the stderr pipe before it writes its result: reading stdout to
    EOF first would block both processes forever (the pipe buffer is 64 KiB)."""
    script = ("import sys, json\n"
              "sys.stderr.write('x' * 300_000)\nsys.stderr.flush()\n"
              "print(json.dumps({'event': 'step', 'done': 1}), flush=True)\n"
              "print(json.dumps({'event': 'result', 'samples_per_s': 1.0}), flush=True)\n")
    steps = []
    result, code, err = compare.run_child([sys.executable, "-c", script], steps.append)
    assert code == 0 and steps == [1]
    assert result == {"event": "result", "samples_per_s": 1.0}
    assert len(err) == 300_000


def test_child_failure_keeps_its_stderr_tail():
    script = "import sys\nsys.stderr.write('y' * 100_000 + 'the end')\nsys.exit(3)\n"
    result, code, err = compare.run_child([sys.executable, "-c", script], lambda done: None)
    assert result is None and code == 3 and err.endswith("the end")


def test_median_reports_the_spread_of_rounds():
    rounds = [{"backend": "dali", "samples_per_s": v, "cpu_ms_per_sample": c,
               "wait_ms_p50": 1.0, "wait_ms_p95": 2.0, "cpu_percent": 100.0,
               "gpu_util_percent": None, "peak_rss_mb": 10.0}
              for v, c in ((100.0, 3.0), (50.0, 3.5), (120.0, 2.9))]
    out = compare._median(rounds)
    assert out["samples_per_s"] == 100.0 and out["samples_per_s_range"] == [50.0, 120.0]
    assert out["cpu_ms_per_sample"] == 3.0 and out["cpu_ms_per_sample_range"] == [2.9, 3.5]
    assert out["gpu_util_percent"] is None and out["repeats"] == 3


def test_load_monitor_flags_load_above_the_cores():
    with LoadMonitor(interval=0.01, cores=10_000) as quiet:
        pass
    assert not quiet.busy and quiet.summary()["load1_max"] is not None
    busy = LoadMonitor(cores=1)
    busy.samples = [0.5, 2.5, 1.0]
    assert busy.busy and busy.summary()["load1_max"] == 2.5
    assert "2.5 on 1 cores" in busy.warning() and "suspect" in busy.warning()


def test_compare_defaults_to_three_interleaved_rounds():
    assert compare.parse_args([]).repeats == 3
    assert compare.parse_args(["--sample", "large"]).sample == "large"


def test_compare_reports_cpu_ms_per_sample_and_load(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--batch-size", "8", "--steps", "2", "--warmup", "1", "--size", "32",
         "--device", "cpu", "--backends", "dali,torch", "--repeats", "2",
         "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["settings"]["repeats"] == 2
    assert set(report["load"]) == {"cores", "load1_max", "load1_median", "busy"}
    for r in report["results"]:
        assert r["cpu_ms_per_sample"] > 0 and r["repeats"] == 2
        low, high = r["samples_per_s_range"]
        assert low <= r["samples_per_s"] <= high
    assert ("busy during the run" in proc.stderr) == report["load"]["busy"]
    assert "CPU ms" in proc.stdout and "/sample" in proc.stdout  # a two-line header


def test_large_sample_is_rejected_for_other_modalities():
    with pytest.raises(SystemExit, match="only for --modality image"):
        compare.sample_data("video", "large")
