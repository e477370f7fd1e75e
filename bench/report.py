"""Ratios and the on-screen tables of a compare.py run.

The table has the README's columns: loader, images/s (clips/s for clips, samples/s for other
data), "our DALI loader is" (our DALI loader's images/s over the row's: "3.04x faster", or
"1.25x slower" where the row is faster) and CPU ms per image; under it, one line says what
each row is. `--details` adds a second table: the min-max over the rounds, the time the
loop waits in next(loader), memory and GPU use. The JSON keeps the documented
(docs/design.md) `speedup` (dali over torch) and `ratios` ("dali/<row>": dali over that row,
the table's column) and adds `speed_over_dali` ("<row>": that row over dali).
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

TABLE_WIDTH = 80  # every line the benchmark prints fits in this many columns
BACKEND_WIDTH = 16  # longer names (a preset's path) are cut in the table, whole in JSON
# what each row is, one line each under the table ("dali:<preset>" rows: see `explain`)
ROWS = {
    "dali": "this project, DALI backend (make_loader(backend=\"dali\"))",
    "torch": "this project, DataLoader path (make_loader(backend=\"torch\"))",
    "classic": "ImageFolder + PIL + torchvision transforms, a DataLoader",
    "dali-stock": "DALI's own recipe (readers.file, image_random_crop, resize)",
    "adapter": "a user Dataset + Sampler on our DALI graph (dali_from_dataset)",
    "usual": "the recipe written the usual way (ImageFolder + PIL + transforms.v2)",
    "ffcv": "FFCV, set up as its docs recommend (bench/peers.py)",
    "spdl": "SPDL, set up as its docs recommend (bench/peers.py)",
    "torchcodec": "torchcodec decoding the same samples (bench/peers*.py)",
    "pyav": "PyAV decoding the same samples (bench/peers*.py)",
    "decode-ceiling": "whole files decoded by libjpeg-turbo, nothing else: a ceiling",
}


def fit(text: str) -> str:
    """`text` wrapped to TABLE_WIDTH columns, continuation lines indented by two spaces."""
    return "\n".join(textwrap.fill(line, TABLE_WIDTH, subsequent_indent="  ",
                                   break_on_hyphens=False) or line
                     for line in text.splitlines())


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


def explain(backend: str) -> str:
    """One line saying what the row `backend` is ("" for a row without one)."""
    name, _, preset = backend.partition(":")
    if name == "dali" and preset:
        return f"our DALI loader, decode preset {preset} (docs/presets.md)"
    return ROWS.get(backend, "")


def unit(modality: str) -> tuple[str, str]:
    """(plural, singular) of what a sample of `modality` is: images, clips or samples."""
    from torch_bridge import registry
    spec = registry.get(modality)
    if spec.batch_schema.clips:
        return "clips", "clip"
    return ("images", "image") if "image" in spec.batch_schema.fields else ("samples", "sample")


def ours_is(dali: float | None, rate: float | None, backend: str) -> str:
    """The "our DALI loader is" cell: "1.00x" on dali's row, "3.04x faster" where dali
    reads 3.04 times the row's samples/s, "1.25x slower" where the row is faster."""
    if backend == "dali":
        return "1.00x"
    if not dali or not rate:
        return "-"
    ratio = dali / rate
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _spread(pair) -> str:
    return "-" if not pair else f"{pair[0]:.0f}-{pair[1]:.0f}"


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _dali_rate(report: dict) -> float | None:
    return next((r.get("samples_per_s") for r in report["results"]
                 if r["backend"] == "dali" and "error" not in r), None)


def table_rows(report: dict) -> list[list[str]]:
    """The main table's cells (a failed row: its backend and "failed"); with --on-error skip
    a last cell counts the skipped samples."""
    dali, skip = _dali_rate(report), report["settings"].get("on_error") == "skip"
    rows = []
    for r in report["results"]:
        label = _short(r["backend"], BACKEND_WIDTH)
        if "error" in r:
            rows.append([label, "failed", "", ""] + ([""] if skip else []))
            continue
        rows.append([label, _fmt(r["samples_per_s"], 0),
                     ours_is(dali, r["samples_per_s"], r["backend"]),
                     _fmt(r.get("cpu_ms_per_sample"), 2)]
                    + ([_fmt(r.get("skipped"), 0)] if skip else []))
    return rows


def _table(title: str, headers: list[str]):
    from rich import box
    from rich.table import Table
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1))
    for k, header in enumerate(headers):
        table.add_column(header, justify="left" if k == 0 else "right", overflow="fold")
    return table


def print_table(report: dict, *, console=None, details: bool = False) -> None:
    """Print the comparison table (at most TABLE_WIDTH columns), what each row is and what
    its ratio means; with `details`, the second table.

    Args:
        report: compare.py's report (modality, device, settings, results, speedup).
        console: a rich Console to print to (default: stdout, TABLE_WIDTH wide).
        details: also print the min-max, waits, memory and GPU use per row.
    """
    from rich.console import Console

    s = report["settings"]
    console = console or Console(width=TABLE_WIDTH)
    many, one = unit(report["modality"])
    headers = ["loader", f"{many}/s", "our DALI loader is", f"CPU ms / {one}"]
    if s.get("on_error") == "skip":
        headers.append("skipped")
    table = _table(f"{report['modality']} on {report['device']}: batch {s['batch_size']}, "
                   f"{s['steps']} steps, medians of {s['repeats']} round(s)", headers)
    for row in table_rows(report):
        table.add_row(*row)
    console.print(table)
    for r in report["results"]:
        why = f"failed: {r['error']}" if "error" in r else explain(r["backend"])
        if why:
            console.print(_short(f"{r['backend']}: {why}", TABLE_WIDTH), markup=False,
                          highlight=False)
    console.print(f"our DALI loader is: dali's {many}/s over the row's (2.00x: twice "
                  f"theirs)", markup=False, highlight=False)
    if details:
        print_details(report, console)


def print_details(report: dict, console) -> None:
    """The second table: min-max samples/s over the rounds, the wait in next(loader) (p50,
    p95), peak memory of the process tree and, on a GPU, its utilisation."""
    gpu = str(report["device"]).startswith("cuda")
    headers = ["loader", "min-max /s", "wait ms p50", "wait ms p95", "RSS MB"]
    table = _table("details", headers + (["GPU %"] if gpu else []))
    for r in report["results"]:
        if "error" not in r:
            table.add_row(_short(r["backend"], BACKEND_WIDTH),
                          _spread(r.get("samples_per_s_range")), _fmt(r["wait_ms_p50"]),
                          _fmt(r["wait_ms_p95"]), _fmt(r["peak_rss_mb"], 0),
                          *([_fmt(r["gpu_util_percent"], 0)] if gpu else []))
    console.print(table)
