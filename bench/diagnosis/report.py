"""The diagnosis as text: a table of measures, the bottleneck, its evidence, the next step."""
from __future__ import annotations


def _fmt(v, unit="", digits=1) -> str:
    return "not measured" if v is None else f"{v:,.{digits}f}{unit}"


def _disk_rows(ev: dict) -> list[tuple[str, str]]:
    if ev["disk_device"] is None or ev["disk_util_percent"] is None:
        why = ev.get("disk_note") or "no block device found"
        return [("disk read / busy", f"not measurable: {why}")]
    return [(f"disk read ({ev['disk_device']}, all processes)",
             _fmt(ev["disk_read_mb_s"], " MB/s")),
            ("disk busy", _fmt(ev["disk_util_percent"], "%", 0))]


def _stages(stage_ms: dict) -> str:
    return " ".join(f"{k} {v:,.0f} ms" for k, v in stage_ms.items()) or "not measured"


def _rows(ev: dict) -> list[tuple[str, str]]:
    transfer = _fmt(ev["transfer_mb_s"], " MB/s", 2) if ev["transfer_mb_s"] is not None \
        else "none (no worker processes)"
    return [("samples/s", _fmt(ev["samples_per_s"])),
            ("data wait, share of step", _fmt(100 * ev["wait_fraction"], "%", 0)),
            ("data wait p50 / p95", f"{ev['wait_ms_p50']:.1f} / {ev['wait_ms_p95']:.1f} ms"),
            ("compute p50", _fmt(ev["compute_ms_p50"], " ms")),
            ("CPU busy per core", " ".join(f"{c:.0f}%" for c in ev["cpu_cores"])),
            ("loader process tree CPU", _fmt(ev["process_cpu_percent"], "%", 0)),
            *_disk_rows(ev),
            ("loader reads from storage", _fmt(ev.get("loader_read_mb_s"), " MB/s")),
            ("sample bytes read (loader.stats)", _fmt(ev.get("bytes_read_mb_s"), " MB/s")),
            ("time per stage (loader.stats)", _stages(ev.get("stage_ms") or {})),
            ("worker->main transfer", transfer),
            ("GPU busy", _fmt(ev["gpu_util_percent"], "%", 0)),
            ("video decoder / JPEG engine", f"{_fmt(ev['decoder_util_percent'], '%', 0)} / "
                                            f"{_fmt(ev['jpeg_util_percent'], '%', 0)}")]


def print_report(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    ev, dx = report["evidence"], report["diagnosis"]
    table = Table(title=f"where the time goes: {ev['backend']} on {ev['device']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for row in _rows(ev):
        table.add_row(*row)
    console = Console(width=None if Console().is_terminal else 110)
    console.print(table)
    console.print(f"[bold]bottleneck: {dx['bottleneck']}[/bold]")
    for line in dx["evidence"]:
        console.print(f"  - {line}")
    console.print(f"next: {dx['next_step']}")
