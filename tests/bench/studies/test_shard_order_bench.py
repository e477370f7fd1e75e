"""bench/studies/shard_order.py on a small listing and on small real shards: the counts it reports
tell the orders apart."""
from __future__ import annotations

import json

from bench.studies.shard_order import main


def test_shard_order_bench_counts(tmp_path, capsys):
    out = tmp_path / "order.json"
    assert main(["--shards", "16", "--per-shard", "1000", "--world", "4", "--windows", "2",
                 "--member-kib", "100", "--cache-mib", "256", "--batch", "32",
                 "--real-shards", "8", "--real-per-shard", "16", "--real-member-kib", "64",
                 "--real-cache-mib", "4", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    rows = {r["order"]: r for r in saved["rows"]}
    glob, shards = rows["global"], rows["shards, window 2"]
    assert glob["ranks_per_shard"] == 4 and shards["ranks_per_shard"] == 1
    assert shards["shards_per_1k"] <= 2 < 12 < glob["shards_per_1k"]
    assert shards["fetched_per_used"] < 1.1 < 5 < glob["fetched_per_used"]  # 200 MiB windows
    assert shards["classes_sorted"] <= 3 < 10 < glob["classes_sorted"]  # 16 classes
    assert shards["classes_shuffled"] > 10
    assert "| shards, window 2 |" in capsys.readouterr().out
    # real shards through ShardSource, FsspecStore (memory://) and the block cache
    real = {r["order"]: r for r in saved["real"]}
    assert real["shards, window 2"]["shards_read"] == 2 < real["global"]["shards_read"] == 8
    assert real["shards, window 2"]["fetches_per_block"] == 1  # each block fetched once
    assert real["global"]["fetches_per_block"] > 1.5  # a 4 MiB cache over 8 MiB of shards
