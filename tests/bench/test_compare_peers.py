"""compare.py --peers: the other loaders' rows and the decode-only ceiling (bench/peers.py).
PyAV (a dependency) and the ceiling always run; a peer that is not installed is skipped
with one line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare import peer_rows
from bench.peers import PEERS, unavailable
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def test_every_peer_is_a_row_or_one_skipped_line():
    lines: list[str] = []
    rows = peer_rows("image", "all", lines.append)
    assert {"pyav", "decode-ceiling"} <= set(rows)
    assert sorted(rows + [line.split()[1] for line in lines]) == sorted(PEERS)
    assert all(line.startswith("skipped: ") and "\n" not in line for line in lines)
    assert unavailable("nosuch").startswith("unknown peer")
    with pytest.raises(SystemExit, match="unknown nosuch"):
        peer_rows("image", "pyav,nosuch", lines.append)
    with pytest.raises(SystemExit, match="only for --modality image or video"):
        peer_rows("hyperspectral", "all", lines.append)


def test_compare_peers_measures_pyav_and_the_ceiling(tmp_path):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--data", str(data),
         "--batch-size", "4", "--steps", "2", "--warmup", "1", "--size", "32",
         "--device", "cpu", "--backends", "decode-ceiling", "--peers", "pyav,ffcv",
         "--repeats", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {r["backend"]: r for r in json.loads(out.read_text())["results"]}
    assert {"decode-ceiling", "pyav"} <= set(results)
    for name in ("decode-ceiling", "pyav"):
        assert results[name]["cpu_ms_per_sample"] > 0 and results[name]["samples"] == 8
    if "ffcv" not in results:
        assert proc.stderr.count("skipped: ffcv") == 1
