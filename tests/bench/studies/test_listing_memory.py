"""bench/studies/listing_memory.py runs (tiny size) and reports every layout; held bytes
are exact."""
from __future__ import annotations

import json

from bench.studies import listing_memory


def test_it_reports_each_layout_and_the_path_table_holds_least(tmp_path):
    out = tmp_path / "m.json"
    assert listing_memory.main(["--n", "3000", "--json", str(out)]) == 0
    rows = {r["layout"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == list(listing_memory.LAYOUTS)
    held = {name: r["held_mb"] for name, r in rows.items()}
    assert held["path_table"] < held["fixed_width"] < held["tuple"]
    assert all(r["n"] == 3000 and "fork_copied_mb" in r for r in rows.values())
