"""The tables of a bench/studies/remote_speed.py run, from its runs."""
from __future__ import annotations

import statistics


def _med(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _rate(epochs: list[dict]) -> list[float]:
    return [e["samples_per_s"] for e in epochs]


def _cpu(epochs: list[dict]) -> list[float]:
    return [e["cpu_ms_per_sample"] for e in epochs]


def _raw(runs: list[dict], modality: str, store: str) -> dict:
    """Median MB/s per raw configuration ("threads x MiB")."""
    kinds = sorted({r["raw"] for r in runs if r["raw"] and r["modality"] == modality
                    and r["store"] == store})
    return {k: _med([r["mb_per_s"] for r in runs if r["raw"] == k and
                     r["modality"] == modality and r["store"] == store]) for k in kinds}


def _cold(rows: list[dict], ceiling: float | None) -> dict:
    """Cold epochs against the local first epoch, the local later ones, and the bound a
    cold epoch can reach: the lower of the local first epoch's rate and the best raw rate
    over the bytes a sample fetched."""
    out: dict = {"samples_per_s": _med([r["cold"]["samples_per_s"] for r in rows]),
                 "cpu_ms": _med([r["cold"]["cpu_ms_per_sample"] for r in rows]),
                 "vs_local_first": _med([r["cold"]["samples_per_s"] /
                                         r["local_first"]["samples_per_s"] for r in rows]),
                 "vs_local": _med([r["cold"]["samples_per_s"] /
                                   statistics.median(_rate(r["local"])) for r in rows])}
    if ceiling and all(r["cold"].get("cache_bytes") for r in rows):
        per_sample = [r["cold"]["cache_bytes"] / r["cold"]["samples"] for r in rows]
        out["mb_per_s"] = _med([r["cold"]["cache_bytes"] / r["cold"]["seconds"] / 1e6
                                for r in rows])
        out["kb_per_sample"] = statistics.median(per_sample) / 1e3
        bounds = [min(r["local_first"]["samples_per_s"], ceiling * 1e6 / b)
                  for r, b in zip(rows, per_sample, strict=True)]  # a cold epoch is a first
        out["bound"] = _med(bounds)
        out["ceiling_samples_per_s"] = ceiling * 1e6 / statistics.median(per_sample)
        out["vs_bound"] = _med([r["cold"]["samples_per_s"] / b
                                for r, b in zip(rows, bounds, strict=True)])
    return out


def summary(runs: list[dict]) -> list[dict]:
    """Per modality, store and backend: local and warm epochs (each warm epoch over the
    local one beside it), cold, the raw ceilings."""
    out = []
    keys = sorted({(r["modality"], r["store"], r["backend"]) for r in runs if r["backend"]})
    for modality, store, backend in keys:
        rows = [r for r in runs if (r["modality"], r["store"], r["backend"]) ==
                (modality, store, backend)]
        raw = _raw(runs, modality, store)
        ceiling = max((v["median"] for v in raw.values() if v), default=None)
        local = [e for r in rows for e in r["local"]]
        warm = [e for r in rows for e in r["warm"]]
        pairs = [(w, lo) for r in rows for w, lo in zip(r["warm"], r["local"], strict=True)]
        out.append({
            "modality": modality, "store": store, "backend": backend, "rounds": len(rows),
            "local": {"samples_per_s": _med(_rate(local)), "cpu_ms": _med(_cpu(local))},
            "warm": {"samples_per_s": _med(_rate(warm)), "cpu_ms": _med(_cpu(warm)),
                     "vs_local": _med([w["samples_per_s"] / lo["samples_per_s"]
                                       for w, lo in pairs]),
                     "cpu_vs_local": _med([lo["cpu_ms_per_sample"] / w["cpu_ms_per_sample"]
                                           for w, lo in pairs])},
            "cold": _cold(rows, ceiling), "raw_mb_per_s": raw, "ceiling_mb_per_s": ceiling})
    return out


def _cell(d: dict | None, digits: int = 0) -> str:
    if not d:
        return "-"
    return f"{d['median']:,.{digits}f} ({d['min']:,.{digits}f}-{d['max']:,.{digits}f})"


def lines(summary: list[dict]) -> list[str]:
    out = ["| modality | store | backend | local /s | warm /s | warm vs local | CPU ms "
           "local / warm |", "|---|---|---|---|---|---|---|"]
    for e in summary:
        local, warm = e["local"], e["warm"]
        out.append(f"| {e['modality']} | {e['store']} | {e['backend']} | "
                   f"{_cell(local['samples_per_s'])} | {_cell(warm['samples_per_s'])} | "
                   f"{_cell(warm['vs_local'], 2)} | {local['cpu_ms']['median']:.3f} / "
                   f"{warm['cpu_ms']['median']:.3f} |")
    out += ["", "| modality | store | backend | cold /s | vs local first epoch | vs local | "
            "CPU ms | cold MB/s | kB a sample | raw GET MB/s (threads x MiB) | bound /s | "
            "cold vs bound |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        cold = e["cold"]
        raw = ", ".join(f"{k}: {v['median']:.1f}" for k, v in e["raw_mb_per_s"].items() if v)
        bound = "-" if cold.get("bound") is None else f"{cold['bound']['median']:,.0f}"
        out.append(f"| {e['modality']} | {e['store']} | {e['backend']} | "
                   f"{_cell(cold['samples_per_s'])} | {_cell(cold['vs_local_first'], 2)} | "
                   f"{_cell(cold['vs_local'], 2)} | {cold['cpu_ms']['median']:.3f} | "
                   f"{_cell(cold.get('mb_per_s'), 1)} | {cold.get('kb_per_sample', 0):.1f} | "
                   f"{raw} | {bound} | "
                   f"{_cell(cold.get('vs_bound'), 2)} |")
    return out


def print_tables(report: dict) -> None:
    print("\n".join(lines(report["summary"])))
    print(f"\nload during the rounds: {report.get('load')}")
