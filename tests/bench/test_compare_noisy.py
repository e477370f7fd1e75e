"""compare.py on a noisy machine: drained child output, CPU-ms per sample, spread, load (the
end-to-end runs are in test_compare.py and test_compare_rows.py)."""
import sys

import pytest

from bench import compare
from bench.metrics import LoadMonitor


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


def test_large_sample_is_rejected_for_other_modalities():
    with pytest.raises(SystemExit, match="only for --modality image"):
        compare.sample_data("video", "large")
