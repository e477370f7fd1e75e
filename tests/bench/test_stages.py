"""compare.py --stages: the per-stage breakdown (bench/stages.py) on tiny data."""
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def test_compare_stages_dali_and_torch(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=24, n_classes=2)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--backends", "dali,torch", "--steps", "3", "--warmup", "1", "--batch-size", "8",
         "--size", "32", "--device", "cpu", "--stages", "--repeats", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {r["backend"]: r for r in json.loads(out.read_text())["results"]}
    dali, torch = results["dali"]["stages"], results["torch"]["stages"]
    for key in ("read_ms", "decode_augment_ms", "transfer_ms"):
        assert dali[key] > 0, key
        assert torch[key] > 0, key
    assert dali["decode_ms"] is None and dali["augment_ms"] is None  # not separable in DALI
    assert torch["decode_ms"] > 0 and torch["augment_ms"] >= 0
    assert abs(torch["decode_ms"] + torch["augment_ms"] - torch["decode_augment_ms"]) < 1e-6
    assert "stages per batch" in proc.stdout
    assert results["dali"]["samples_per_s"] > 0  # the usual metrics are still there


def test_stages_off_by_default():
    from bench import compare, run_one
    assert compare.parse_args([]).stages is False
    assert run_one.parser().parse_args(["--backend", "dali", "--data", "x"]).stages is False


def test_median_stages_and_unmeasured_backends():
    from bench.stages import empty_stages, instrument, median_stages
    rounds = [{"read_ms": 1.0, "transfer_ms": None}, {"read_ms": 3.0, "transfer_ms": None},
              {"read_ms": 2.0, "transfer_ms": None}]
    assert median_stages(rounds) == {"read_ms": 2.0, "transfer_ms": None}
    assert instrument("classic", object()) is None
    assert set(empty_stages()) >= {"read_ms", "decode_augment_ms", "transfer_ms"}
    assert all(v is None for v in empty_stages().values())
