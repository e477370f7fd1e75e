"""The tables of a bench/studies/store_table.py run, and its targets, from its report dict."""
from __future__ import annotations

# (row, target ratio over folder): local shards at least as fast, pre-resized 1.5x
TARGETS = (("shards", 1.0), ("shards-320", 1.5))
LISTING_TARGET = {"seconds": 10.0, "rss_mb": 150.0}  # 1M samples from shard indexes


def targets(report: dict) -> list[dict]:
    """Each target with the measured ratio and whether it was met: the verdict reads the
    median of the per-round ratios; the ratio of the medians and the CPU-time ratio come
    with it."""
    out = []
    for entry in report.get("throughput", []):
        goal = dict(TARGETS).get(entry["row"])
        if goal is None:
            continue
        ratio = entry["vs_folder_round_median"]
        out.append({"target": f"{entry['row']} >= {goal:g}x folder ({entry['backend']}, "
                    "median of the per-round ratios)", "ratio": ratio, "met": ratio >= goal,
                    "ratio_of_medians": entry["vs_folder"],
                    "cpu_vs_folder": entry["cpu_vs_folder"]})
    scale = report.get("listing")
    if scale:
        got = scale["shards_source"]
        out.append({"target": f"{scale['samples']:,} samples listed from shard indexes in "
                    f"< {LISTING_TARGET['seconds']:g} s and < {LISTING_TARGET['rss_mb']:g} MB",
                    "ratio": None, "met": got["seconds"] < LISTING_TARGET["seconds"]
                    and got["rss_mb"] < LISTING_TARGET["rss_mb"]})
    return out


def _fmt(value, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def throughput_lines(table: list[dict]) -> list[str]:
    lines = ["| row | backend | images/s | min-max | vs folder | per round | CPU ms/img | "
             "CPU vs folder | wait p95 ms |", "|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        low, high = e["samples_per_s_range"] or (None, None)
        rounds = e["vs_folder_rounds"]
        lines.append(f"| {e['row']} | {e['backend']} | {_fmt(e['samples_per_s'])} | "
                     f"{_fmt(low)}-{_fmt(high)} | {e['vs_folder']:.2f} | "
                     f"{e['vs_folder_round_median']:.2f} ({min(rounds):.2f}-"
                     f"{max(rounds):.2f}) | {_fmt(e['cpu_ms_per_sample'], 2)} | "
                     f"{e['cpu_vs_folder']:.2f} | {_fmt(e['wait_ms_p95'], 0)} |")
    return lines


def listing_lines(scale: dict) -> list[str]:
    lines = [f"| {scale['samples']:,} samples | seconds | RSS growth MB |", "|---|---|---|"]
    for key in ("shards_source", "shards_loader", "folder_source", "folder_loader",
                "shards_index_build"):
        if key in scale:
            lines.append(f"| {key.replace('_', ' ')} | {scale[key]['seconds']:.2f} | "
                         f"{scale[key]['rss_mb']:.0f} |")
    return lines


def worker_lines(workers: dict) -> list[str]:
    lines = ["| listing | main RSS MB | worker RSS MB first / last | worker USS MB first / last |",
             "|---|---|---|---|"]
    for name, run in workers.items():
        rss = ", ".join(f"{w['first']['rss_mb']:.0f} / {w['last']['rss_mb']:.0f}"
                        for w in run["workers"])
        uss = ", ".join(f"{w['first']['uss_mb']:.0f} / {w['last']['uss_mb']:.0f}"
                        for w in run["workers"])
        lines.append(f"| {name} ({run['samples']:,}) | {run['main_rss_mb']:.0f} | {rss} | "
                     f"{uss} |")
    return lines


def print_report(report: dict) -> None:
    """The tables (markdown), the data each row decodes, the targets and the load."""
    print(" | ".join(f"{k}: {v['mean_bytes'] / 1e3:.0f} kB, {v['mean_width']:.0f}x"
                     f"{v['mean_height']:.0f}" for k, v in report.get("data", {}).items()))
    print("\n".join(throughput_lines(report.get("throughput", []))))
    if "listing" in report:
        print("\n".join(listing_lines(report["listing"])))
    if "workers" in report:
        print("\n".join(worker_lines(report["workers"])))
    for t in report.get("targets", []):
        ratio = "" if t["ratio"] is None else f" ({t['ratio']:.2f})"
        print(f"target {t['target']}: {'met' if t['met'] else 'MISSED'}{ratio}")
    load = report.get("load") or {}
    if load:
        print(f"load average during the throughput rounds: {load}")
