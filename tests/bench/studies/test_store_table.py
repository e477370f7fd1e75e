"""bench/studies/store_table.py end to end on tiny settings: every row (S3 through moto included),
the listing probes and the worker memory come back in its JSON, with sane values."""
import json

import pytest

from tests.conftest import bounded


@pytest.mark.slow
def test_store_table_reports_every_row(tmp_path, monkeypatch, capsys):
    """The study's main in this process (torch and DALI are imported already); its rows
    and probes still run in processes of their own, as from the command line."""
    from bench.studies import store_table
    from dali_pipes.native import builder
    out = tmp_path / "table.json"
    # the sample images in a fresh cache, the compiled native operators from the usual one
    # (building them is tests/native's subject, and costs half a minute here); rows forked
    # from a server this process started earlier see the usual cache, the same operators
    native = builder.cache_dir()
    native.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "native").symlink_to(native, target_is_directory=True)
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path / "cache"))
    with bounded(900):  # a hang fails the test
        code = store_table.main(
            ["--backends", "dali", "--images", "16", "--batch-size", "8", "--steps", "1",
             "--warmup", "1", "--rounds", "1", "--size", "32", "--device", "cpu",
             "--listing-samples", "300", "--worker-batches", "1", "--work", str(tmp_path / "work"),
             "--scale-dir", str(tmp_path / "scale"), "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]
    report = json.loads(out.read_text())
    rows = {(e["row"], e["backend"]): e for e in report["throughput"]}
    assert sorted(r for r, _ in rows) == sorted(["folder", "shards", "shards-320",
                                                  "folder-pass", "s3-cold", "s3-warm"])
    for entry in rows.values():
        assert entry["samples_per_s"] > 0 and entry["wait_ms_p95"] > 0, entry
        assert entry["repeats"] == 1
    assert rows[("folder", "dali")]["vs_folder"] == 1.0
    assert rows[("folder-pass", "dali")]["vs_folder"] == 1.0
    assert rows[("s3-cold", "dali")]["steps"] == 2  # one pass: 16 images / batch 8
    assert rows[("shards", "dali")]["steps"] == 1
    # the pre-resized shards really hold smaller images (the built-in set is 500x375)
    assert report["data"]["folder"]["mean_width"] == 500
    assert report["data"]["shards-320"]["mean_width"] == 320
    assert report["data"]["shards-320"]["mean_bytes"] < report["data"]["shards"]["mean_bytes"]
    scale = report["listing"]
    assert scale["samples"] == 300
    for key in ("shards_source", "shards_loader", "folder_source", "folder_loader"):
        assert scale[key]["samples"] == 300 and scale[key]["seconds"] > 0, key
    for name in ("folder", "shards"):
        workers = report["workers"][name]["workers"]
        assert len(workers) == 2 and all(w["last"]["uss_mb"] > 0 for w in workers)
        # the make_loader listing row: timed in the worker-memory process, before its workers
        assert scale[f"{name}_loader"]["seconds"] == report["workers"][name]["listing_seconds"]
    assert [isinstance(t["met"], bool) for t in report["targets"]] == [True] * 3
    assert "| s3-warm | dali |" in printed.out


def test_round_order_runs_each_row_once_cold_before_warm_and_rotates():
    from bench.studies.store_table import ROWS, round_order
    firsts = set()
    for rnd in range(4):
        order = round_order(rnd, list(ROWS), ["dali", "torch"])
        assert sorted(order) == sorted((r, b) for r in ROWS for b in ("dali", "torch"))
        for backend in ("dali", "torch"):
            rows = [r for r, b in order if b == backend]
            assert rows.index("s3-warm") == rows.index("s3-cold") + 1
        backends = [b for _, b in order]
        assert backends == sorted(backends, key=backends.index)  # one backend, then the other
        firsts.add(order[0])
    assert len(firsts) > 1
    assert [r for r, _ in round_order(0, ["folder", "shards", "folder-pass"], ["dali"])] == \
        ["folder", "shards", "folder-pass"]


def test_targets_read_the_per_round_median():
    from bench.studies.store_report import targets
    from bench.studies.store_table import vs_folder_ratios
    base = {"samples_per_s": 100.0, "rounds": [100.0, 100.0, 100.0], "cpu_ms_per_sample": 2.0}
    row = {"samples_per_s": 160.0, "rounds": [140.0, 160.0, 300.0], "cpu_ms_per_sample": 1.0}
    ratios = vs_folder_ratios(row, base)
    assert ratios["vs_folder_rounds"] == [1.4, 1.6, 3.0]
    assert ratios["vs_folder_round_median"] == 1.6 and ratios["cpu_vs_folder"] == 2.0
    table = [{"row": "shards-320", "backend": "dali", **ratios},
             {"row": "shards", "backend": "dali",
              **vs_folder_ratios({**row, "rounds": [90.0, 99.0, 200.0]}, base)}]
    verdicts = [(t["target"].split(" ")[0], t["met"]) for t in targets({"throughput": table})]
    assert verdicts == [("shards-320", True), ("shards", False)]
