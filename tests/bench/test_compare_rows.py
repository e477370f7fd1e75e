"""compare.py on a first run with a bad file: the native operators built before any round,
--on-error skip, a one-line cause for a failing row, interleaved rounds, progress lines off a
terminal, an 80-column table and a PNG with content."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from bench.compare import last_error_line
from bench.report import TABLE_WIDTH, print_table, speedups
from tests.bench.png_check import assert_plot_has_content
from tests.conftest import write_image_folder
from torch_bridge import registry

ROOT = Path(__file__).resolve().parents[2]
_FAILING_CXX = "#!/bin/sh\necho 'fatal error: nothing here' >&2\nexit 1\n"


def test_last_error_line_names_the_exception_not_a_traceback():
    err = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
           "    raise SampleError(...)\n"
           "torch_bridge.errors.SampleError: sample 3 (/x/a.jpg): truncated\n")
    assert last_error_line(err) == "SampleError: sample 3 (/x/a.jpg): truncated"
    assert last_error_line("warning: w\nKeyboardInterrupt\n") == "KeyboardInterrupt"
    assert last_error_line("killed by signal\n") == "killed by signal"
    assert last_error_line("") == "no error output"


def _row(backend, rate):
    return {"backend": backend, "samples_per_s": rate, "samples_per_s_range": [rate * 0.9,
            rate * 1.1], "cpu_ms_per_sample": 12.34, "wait_ms_p50": 123.4,
            "wait_ms_p95": 1234.5, "cpu_percent": 190.0, "gpu_util_percent": 97.0,
            "peak_rss_mb": 12345.0, "skipped": 3}


@pytest.mark.parametrize("device,on_error", [("cpu", "raise"), ("cuda", "skip")])
def test_default_image_table_reads_like_the_readme_in_80_columns(device, on_error):
    rows = registry.get("image").compare_rows
    results = [_row(b, 3000.0 / (k + 1)) for k, b in enumerate(rows)]
    results += [_row("decode-ceiling", 4500.0),
                {"backend": "dali:/a/long/path/to/my_preset.toml",
                 "error": "SampleError: sample 3 (/data/x/a.jpg): " + "why " * 40}]
    report = {"modality": "image", "device": device, "results": results,
              "settings": {"batch_size": 256, "steps": 30, "repeats": 3, "on_error": on_error},
              **speedups(results)}
    buf = io.StringIO()
    print_table(report, console=Console(file=buf, width=TABLE_WIDTH), details=True)
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) <= 80, "\n".join(lines)
    text = buf.getvalue()
    header = next(x for x in lines if x.startswith("loader"))
    assert header.split()[:6] == ["loader", "images/s", "our", "DALI", "loader", "is"]
    assert "CPU ms / image" in header and ("skipped" in header) == (on_error == "skip")
    cells: dict = {}  # the main table's cells (the details table repeats the names)
    for x in lines:
        if x.split() and x.split()[0] in rows:
            cells.setdefault(x.split()[0], x.split()[1:])
    assert cells["dali"][:2] == ["3,000", "1.00x"] and cells["dali"][-1 - (
        on_error == "skip")] == "12.34"
    assert cells["torch"][:3] == ["1,500", "2.00x", "faster"]  # dali / torch, as the README
    assert "1.50x slower" in text  # decode-ceiling reads more images/s than ours
    for backend in rows:  # every row explained in one line under the table
        assert any(x.startswith(f"{backend}: ") for x in lines), backend
    assert any(x.startswith("our DALI loader is: dali's images/s over the row's (")
               and x.endswith(")") for x in lines)  # one line
    assert "dali:/a/long/path/to/my_preset.toml: failed: SampleError: sample 3" in text
    assert "wait ms p50" in text and ("GPU %" in text) == (device == "cuda")
    assert report["ratios"]["dali/torch"] == pytest.approx(2.0)  # the column's ratio
    assert report["speed_over_dali"]["torch"] == pytest.approx(0.5)  # kept in the JSON


def test_a_first_run_with_a_bad_file_two_rounds_and_a_failing_row(tmp_path):
    """One run (each row is a process importing torch), four subjects: the native operators
    are built in the parent, behind one line, before the first round (a fresh cache and a
    compiler that fails: quick, and visible); a truncated file is skipped by our loader and
    fails the classic row with a one-line cause; two interleaved rounds give medians with
    their spread; every line fits 80 columns and the plot has content."""
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    bad = sorted(data.glob("*/*.jpg"))[0]
    bad.write_bytes(bad.read_bytes()[:300])  # a truncated JPEG
    cxx = tmp_path / "cxx"
    cxx.write_text(_FAILING_CXX)
    cxx.chmod(0o755)
    env = {**os.environ, "DALI_PIPES_CACHE": str(tmp_path / "cache"),
           "DALI_PIPES_CXX": str(cxx)}
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--batch-size", "8", "--steps", "2", "--warmup", "0", "--size", "32",
         "--device", "cpu", "--backends", "dali,classic", "--repeats", "2",
         "--on-error", "skip", "--json", str(out), "--plot", str(tmp_path / "p.png")],
        capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]  # a row failed: the exit code says so
    report = json.loads(out.read_text())
    err = proc.stderr.splitlines()
    building = err.index("building native operators (one time) ...")  # no build seen here
    first_round = err.index("dali (round 1 of 2)")
    assert building < first_round
    assert any(x.startswith("native operator policy_op unavailable") for x in err[:first_round])
    dali, classic = report["results"]
    assert dali["skipped"] == 1 and dali["samples_per_s"] > 0  # the one truncated file
    assert classic["error"].startswith("OSError") and "\n" not in classic["error"]
    assert "Traceback" not in proc.stderr
    assert f"classic failed: {classic['error']}" in proc.stderr
    assert "classic (round 2 of 2)" not in err  # a failed row is left out of later rounds
    first_eta = next(i for i, x in enumerate(err) if "ETA" in x)
    assert first_eta > err.index("classic (round 1 of 2)")  # once every row ran a round
    assert any(x.startswith("measuring: 8/8 (100%)") for x in err)
    assert report["settings"]["repeats"] == 2 and dali["repeats"] == 2
    low, high = dali["samples_per_s_range"]
    assert low <= dali["samples_per_s"] <= high and dali["cpu_ms_per_sample"] > 0
    assert set(report["load"]) == {"cores", "others_cores", "load1_max", "load1_median",
                                   "busy"}
    assert ("busy during the run" in proc.stderr) == report["load"]["busy"]
    lines = proc.stdout.splitlines() + err
    assert all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
    assert "skip" in proc.stdout and "failed" in proc.stdout
    assert_plot_has_content(tmp_path / "p.png")


def test_sample_data_creation_shows_progress_lines_then_says_cached(tmp_path, monkeypatch,
                                                                    capsys):
    from bench.compare import sample_data
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path))
    folder = sample_data("hyperspectral")
    err = capsys.readouterr().err.splitlines()
    assert folder.is_dir() and folder.parent == tmp_path
    assert err and err[-1].endswith("ETA 0s") and "2/2 (100%)" in err[-1], err
    assert sample_data("hyperspectral") == folder
    said = capsys.readouterr().err  # one line, wrapped to 80 columns where it is longer
    assert "".join(said.split()) == "".join(f"sample ENVI/SPE scenes: cached ({folder})".split())


def test_help_gives_every_default(capsys):
    from bench.compare import parse_args
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("samples per batch (default: 64)", "(default: 30)", "(default: auto)",
                  "output image side in pixels (default: 224)"):
        assert shown in text
    assert "(default: None)" not in text
