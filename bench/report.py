"""Ratios and the on-screen table of a compare.py run."""
from __future__ import annotations


def speedups(results: list[dict]) -> dict:
    """`speedup` (DALI over torch samples/s) and our DALI loader over every other row."""
    rate = {r["backend"]: r["samples_per_s"] for r in results}
    out = {"speedup": rate["dali"] / rate["torch"] if rate.get("dali") and rate.get("torch")
           else None}
    if rate.get("dali"):
        out["ratios"] = {f"dali/{b}": rate["dali"] / v for b, v in rate.items()
                         if b != "dali" and v}
    return out


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _spread(pair) -> str:
    return "-" if not pair else f"{pair[0]:,.0f}-{pair[1]:,.0f}"


def print_table(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    s = report["settings"]
    table = Table(title=f"{report['modality']} on {report['device']}: batch {s['batch_size']}"
                        f", {s['steps']} timed steps, {s['repeats']} round(s)")
    for name in ("backend", "samples/s", "min-max", "x dali", "CPU ms/sample", "wait p50 ms",
                 "wait p95 ms", "CPU %", "GPU %", "peak RSS MB"):
        table.add_column(name, justify="left" if name == "backend" else "right")
    dali = next((r["samples_per_s"] for r in report["results"] if r["backend"] == "dali"), None)
    for r in report["results"]:
        rel = dali / r["samples_per_s"] if dali and r["samples_per_s"] else None
        table.add_row(r["backend"], _fmt(r["samples_per_s"]),
                      _spread(r.get("samples_per_s_range")), _fmt(rel, 2),
                      _fmt(r.get("cpu_ms_per_sample"), 2), _fmt(r["wait_ms_p50"]),
                      _fmt(r["wait_ms_p95"]), _fmt(r["cpu_percent"], 0),
                      _fmt(r["gpu_util_percent"], 0), _fmt(r["peak_rss_mb"], 0))
    console = Console(width=None if Console().is_terminal else 120)
    console.print(table)
    if report.get("speedup") is not None:
        console.print(f"speedup (dali / torch samples/s): {report['speedup']:.2f}x")
    console.print("'x dali' is how many times faster our DALI loader ran than that row.")
