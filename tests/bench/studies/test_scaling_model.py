"""docs/scaling.md's model: its bounds come out where its arithmetic puts them."""
from __future__ import annotations

import pytest

from bench.studies.scaling_model import Inputs, index_walk, pack_rows, pack_task, train_rows


def test_a_pack_task_waits_on_s3_latency_and_one_prefix_caps_the_cluster():
    p = Inputs()
    task = pack_task(p)
    assert task["files"] == pytest.approx(p.shard_bytes / p.file_bytes)
    assert task["read_s"] > task["cpu_s"]  # 8 GETs at once still wait more than they work
    rows = {r["nodes"]: r for r in pack_rows(p, [1, 8, 64], partitions=1)}
    assert rows[1]["bound"] == "GET latency per task"
    assert rows[1]["files_per_s"] == pytest.approx(p.cores * task["files"] / task["task_s"])
    assert rows[8]["files_per_s"] == rows[64]["files_per_s"] == p.get_per_prefix
    spread = {r["nodes"]: r for r in pack_rows(p, [64], partitions=1000)}
    assert spread[64]["files_per_s"] == pytest.approx(64 * rows[1]["files_per_s"])
    assert "listing takes longer" in spread[64]["bound"]


def test_training_reads_are_bounded_by_requests_per_prefix():
    p = Inputs()
    rows = train_rows(p, ranks=64, rank_rate=2000)
    assert [r["rank_rate_allowed"] for r in rows] == pytest.approx(
        [p.get_per_prefix / (64 * r["gets_per_sample"]) for r in rows])
    assert rows[0]["rank_rate_allowed"] < rows[1]["rank_rate_allowed"] < 2000 < \
        rows[2]["rank_rate_allowed"]
    walk = index_walk(p)
    assert walk["hours_uncached"] > walk["hours_cached"] > 1 > walk["with_saved_indexes_s"] / 3600
