"""Ratios and the on-screen table of a compare.py run.

The table fits 80 columns. Its one ratio, "vs dali", is a row's samples/s over our DALI
loader's (2.00: twice as fast as dali, 0.50: half as fast). The JSON keeps the documented
(docs/design.md) `speedup` (dali over torch) and `ratios` ("dali/<row>": dali over that
row) and adds `speed_over_dali` ("<row>": that row over dali, the table's column).
"""
from __future__ import annotations

import json
from pathlib import Path

TABLE_WIDTH = 80
BACKEND_WIDTH = 16  # longer names (a preset's path) are cut in the table, whole in JSON


def write_json(path: Path, report: dict) -> None:
    """A benchmark's report as indented JSON at `path` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def speedups(results: list[dict]) -> dict:
    """`speedup` (DALI over torch samples/s), `ratios` (dali over every other row) and
    `speed_over_dali` (every row over dali); rows that failed have no ratio.

    Args:
        results: compare.py's rows, each with "backend" and "samples_per_s" (or "error").
    Returns:
        {"speedup": float | None, "ratios": {...}, "speed_over_dali": {...}}; the last two
        only when the dali row was measured.
    """
    rate = {r["backend"]: r.get("samples_per_s") for r in results if "error" not in r}
    out = {"speedup": rate["dali"] / rate["torch"] if rate.get("dali") and rate.get("torch")
           else None}
    if rate.get("dali"):
        out["ratios"] = {f"dali/{b}": rate["dali"] / v for b, v in rate.items()
                         if b != "dali" and v}
        out["speed_over_dali"] = {b: v / rate["dali"] for b, v in rate.items() if v}
    return out


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _spread(pair) -> str:
    return "-" if not pair else f"{pair[0]:.0f}-{pair[1]:.0f}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


HEADERS = {"backend": "backend", "rate": "samples/s", "spread": "samples/s\nmin-max",
           "vs": "vs\ndali", "cpu": "CPU ms\n/sample", "p50": "wait ms\np50",
           "p95": "wait ms\np95", "rss": "RSS\nMB", "gpu": "GPU\n%", "skip": "skip"}


def columns(report: dict) -> list[str]:
    """The table's column keys (HEADERS): gpu only on a GPU run, skip with --on-error skip."""
    keys = ["backend", "rate", "spread", "vs", "cpu", "p50", "p95", "rss"]
    if str(report["device"]).startswith("cuda"):
        keys.append("gpu")
    if report["settings"].get("on_error") == "skip":
        keys.append("skip")
    return keys


def table_rows(report: dict, keys: list[str]) -> list[list[str]]:
    """The table's cells for the columns `keys` (a failed row: its backend and "failed")."""
    dali = next((r.get("samples_per_s") for r in report["results"]
                 if r["backend"] == "dali" and "error" not in r), None)
    rows = []
    for r in report["results"]:
        label = _short(r["backend"], BACKEND_WIDTH)
        if "error" in r:
            rows.append([label, "failed"] + [""] * (len(keys) - 2))
            continue
        rel = r["samples_per_s"] / dali if dali and r["samples_per_s"] else None
        cells = {"backend": label, "rate": _fmt(r["samples_per_s"]),
                 "spread": _spread(r.get("samples_per_s_range")), "vs": _fmt(rel, 2),
                 "cpu": _fmt(r.get("cpu_ms_per_sample"), 2), "p50": _fmt(r["wait_ms_p50"]),
                 "p95": _fmt(r["wait_ms_p95"]), "rss": _fmt(r["peak_rss_mb"], 0),
                 "gpu": _fmt(r["gpu_util_percent"], 0), "skip": _fmt(r.get("skipped"), 0)}
        rows.append([cells[k] for k in keys])
    return rows


def print_table(report: dict, *, console=None) -> None:
    """Print the comparison table (at most TABLE_WIDTH columns) and what its ratio means.

    Args:
        report: compare.py's report (modality, device, settings, results, speedup).
        console: a rich Console to print to (default: stdout, TABLE_WIDTH wide).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    s = report["settings"]
    console = console or Console(width=TABLE_WIDTH)
    table = Table(title=f"{report['modality']} on {report['device']}: batch {s['batch_size']}"
                        f", {s['steps']} steps, {s['repeats']} round(s)",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=0)
    keys = columns(report)
    for key in keys:
        table.add_column(HEADERS[key], justify="left" if key == "backend" else "right",
                         overflow="fold")
    for row in table_rows(report, keys):
        table.add_row(*row)
    console.print(table)
    for r in report["results"]:
        if "error" in r:
            console.print(_short(f"{r['backend']} failed: {r['error']}", TABLE_WIDTH),
                          markup=False, highlight=False)
    if report.get("speedup") is not None:
        console.print(f"speedup (dali / torch samples/s): {report['speedup']:.2f}x")
    console.print("vs dali = the row's samples/s over dali's (2.00: twice as fast as dali).")
    if "skip" in keys:
        console.print("skip = samples skipped (--on-error skip); '-': that loader cannot.")
