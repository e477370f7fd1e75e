"""compare.py on a noisy machine: drained child output, CPU-ms per sample, spread, load (the
end-to-end runs are in test_compare.py and test_compare_rows.py)."""
import subprocess
import sys
import time

import psutil
import pytest

from bench import compare
from bench.launch import run_child
from bench.metrics import LoadMonitor


def test_child_writing_over_64k_to_stderr_does_not_deadlock(tmp_path):
    """A child that fills the stderr pipe before it writes its result: reading stdout to
    EOF first would block both processes forever (the pipe buffer is 64 KiB)."""
    script = ("import sys, json\n"
              "sys.stderr.write('x' * 300_000)\nsys.stderr.flush()\n"
              "print(json.dumps({'event': 'step', 'done': 1}), flush=True)\n"
              "print(json.dumps({'event': 'result', 'samples_per_s': 1.0}), flush=True)\n")
    steps = []
    result, code, err = run_child([sys.executable, "-c", script], steps.append)
    assert code == 0 and steps == [1]
    assert result == {"event": "result", "samples_per_s": 1.0}
    assert len(err) == 300_000


def test_child_failure_keeps_its_stderr_tail():
    script = "import sys\nsys.stderr.write('y' * 100_000 + 'the end')\nsys.exit(3)\n"
    result, code, err = run_child([sys.executable, "-c", script], lambda done: None)
    assert result is None and code == 3 and err.endswith("the end")


def test_median_reports_the_spread_of_rounds():
    rounds = [{"backend": "dali", "samples_per_s": v, "cpu_ms_per_sample": c,
               "wait_ms_p50": 1.0, "wait_ms_p95": 2.0, "cpu_percent": 100.0,
               "gpu_util_percent": None, "peak_rss_mb": 10.0}
              for v, c in ((100.0, 3.0), (50.0, 3.5), (120.0, 2.9))]
    out = compare.median_row(rounds)
    assert out["samples_per_s"] == 100.0 and out["samples_per_s_range"] == [50.0, 120.0]
    assert out["cpu_ms_per_sample"] == 3.0 and out["cpu_ms_per_sample_range"] == [2.9, 3.5]
    assert out["gpu_util_percent"] is None and out["repeats"] == 3


_BURN = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"


def test_load_monitor_counts_other_processes_not_the_benchmarks_own():
    """A process the benchmark starts is its own CPU, however busy; one outside its tree
    (here detached: re-parented to init) is the others' CPU. Other tests running beside
    this one can only add to the others."""
    with LoadMonitor(interval=0.05) as ours:
        subprocess.run([sys.executable, "-c", _BURN], check=True, timeout=120)
    assert ours.own_seconds >= 0.9
    with LoadMonitor(interval=0.05) as theirs:
        detached = subprocess.run(  # the shell exits at once; its child runs on, not ours
            ["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', _BURN],
            capture_output=True, text=True, check=True, timeout=60)
        pid = int(detached.stdout)
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.05)
    assert theirs.own_seconds < 0.5
    assert theirs.others_cores * theirs.wall >= 0.8
    assert set(theirs.summary()) == {"cores", "others_cores", "load1_max", "load1_median",
                                     "busy"}


def test_busy_means_others_took_a_quarter_of_the_cores():
    monitor = LoadMonitor(cores=4)
    assert not monitor.busy  # not measured yet
    monitor.others_cores = 0.9
    assert not monitor.busy
    monitor.others_cores = 1.1
    assert monitor.busy and "used 1.1 of 4 cores" in monitor.warning()
    assert "suspect" in monitor.warning()


def test_compare_defaults_to_three_interleaved_rounds():
    assert compare.parse_args([]).repeats == 3
    assert compare.parse_args(["--sample", "large"]).sample == "large"


def test_large_sample_is_rejected_for_other_modalities():
    with pytest.raises(SystemExit, match="only for --modality image"):
        compare.sample_data("video", "large")
