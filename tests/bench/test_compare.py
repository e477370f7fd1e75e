"""compare.py end to end on a tiny data set. One run measures every default row, the peers
and the per-stage breakdown (each row is a process importing torch: one run keeps the suite
short; main runs in this process, whose runs share the server the rows are forked from);
its JSON follows docs/design.md."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bounded, write_image_folder

ROOT = Path(__file__).resolve().parents[2]
_ROWS = ["dali", "torch", "classic", "dali-stock"]
_MEASURES = ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "cpu_percent", "peak_rss_mb",
             "cpu_ms_per_sample")


def _compare(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "compare.py"), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_compare_measures_every_row_the_peers_and_the_stages(tmp_path, capsys):
    """compare.py's main in this process (torch and DALI are imported already); each row is
    still measured in a process of its own, forked from one server that the runs of this
    pytest process share. test_a_missing_data_folder_is_refused... runs the script."""
    from bench import compare
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "r.json"
    with bounded(600):  # a hang fails the test
        code = compare.main(["--data", str(data), "--batch-size", "8", "--steps", "2", "--warmup",
                             "1", "--size", "32", "--device", "cpu", "--backends", ",".join(_ROWS),
                             "--peers", "pyav,ffcv,decode-ceiling", "--stages", "--repeats", "1",
                             "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    report = json.loads(out.read_text())
    results = {r["backend"]: r for r in report["results"]}
    _check_contract(report, printed.out)
    _check_peers(results, printed.err)
    _check_stages(results, printed.out)


def _check_contract(report: dict, stdout: str) -> None:
    assert report["modality"] == "image" and report["device"] == "cpu"
    names = [r["backend"] for r in report["results"]]
    assert names[:4] == _ROWS and {"pyav", "decode-ceiling"} <= set(names[4:])
    for r in report["results"]:
        for key in _MEASURES:
            assert r[key] > 0, (r["backend"], key)
        assert r["gpu_util_percent"] is None and r["repeats"] == 1
        assert r["wait_ms_p95"] >= r["wait_ms_p50"]
        low, high = r["samples_per_s_range"]
        assert low <= r["samples_per_s"] <= high
    rates = {r["backend"]: r["samples_per_s"] for r in report["results"]}
    assert report["speedup"] == pytest.approx(rates["dali"] / rates["torch"])
    assert set(report["ratios"]) == {f"dali/{b}" for b in names if b != "dali"}
    assert report["ratios"]["dali/classic"] == pytest.approx(rates["dali"] / rates["classic"])
    assert "torch" in report["env"] and "dali" in report["env"]
    assert set(report["load"]) == {"cores", "others_cores", "load1_max", "load1_median",
                                   "busy"}
    assert "images/s" in stdout and "our DALI loader is" in stdout
    assert "CPU ms / image" in stdout and "torch: this project, DataLoader path" in stdout


def _check_peers(results: dict, stderr: str) -> None:
    for name in ("decode-ceiling", "pyav"):
        assert results[name]["samples"] == 16, name  # 2 steps of 8
    if "ffcv" in results:  # where it is installed: its row, every sample
        assert results["ffcv"]["samples"] == 16
    else:  # not installable everywhere: one line says so
        assert stderr.count("skipped: ffcv") == 1


def _check_stages(results: dict, stdout: str) -> None:
    dali, torch = results["dali"]["stages"], results["torch"]["stages"]
    for key in ("read_ms", "decode_augment_ms", "transfer_ms"):
        assert dali[key] > 0, key
        assert torch[key] > 0, key
    assert dali["decode_ms"] is None and dali["augment_ms"] is None  # not separable in DALI
    assert torch["decode_ms"] > 0 and torch["augment_ms"] >= 0
    assert abs(torch["decode_ms"] + torch["augment_ms"] - torch["decode_augment_ms"]) < 1e-6
    assert all(v is None for v in results["classic"]["stages"].values())  # not instrumented
    assert "stages per batch" in stdout


def test_a_missing_data_folder_is_refused_before_anything_runs(tmp_path):
    proc = _compare("--data", str(tmp_path / "none"), "--steps", "1", "--device", "cpu",
                    "--backends", "dali", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"argument --data: {tmp_path / 'none'}: does not exist" in proc.stderr
    assert "building native operators" not in proc.stderr and "round 1" not in proc.stderr


def test_compare_hyperspectral(tmp_path, capsys):
    """In this process too (see test_compare_measures_every_row...)."""
    from bench import compare
    from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
    small_scene_folder(tmp_path / "scenes")
    out = tmp_path / "h.json"
    with bounded(600):  # a hang fails the test
        code = compare.main(["--modality", "hyperspectral", "--data", str(tmp_path / "scenes"),
                             "--batch-size", "16", "--steps", "3", "--warmup", "1",
                             "--device", "cpu", "--repeats", "1", "--json", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    report = json.loads(out.read_text())
    assert [r["backend"] for r in report["results"]] == ["dali", "torch"]
    assert report["speedup"] > 0 and all(r["samples_per_s"] > 0 for r in report["results"])
