"""The tables of a bench/studies/remote_speed.py run, from its runs."""
from __future__ import annotations

import statistics


def _med(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _rows(runs: list[dict], **key) -> list[dict]:
    return [r for r in runs if all(r[k] == v for k, v in key.items())]


def _per_round(rows: list[dict], base: list[dict], field: str) -> list[float]:
    """rows[field] / base[field], round by round (rows of one round ran close together)."""
    ref = {r["round"]: r[field] for r in base}
    return [r[field] / ref[r["round"]] for r in rows if r["round"] in ref]


def summary(runs: list[dict], twins: dict) -> list[dict]:
    """Per modality, store and backend: local, warm and cold samples/s and CPU ms, the
    per-round ratios to local, cold MB/s and the raw ceiling (`twins[m][s]`: the store
    whose `local` row is `s`'s)."""
    out = []
    for modality, stores in twins.items():
        for store, twin in stores.items():
            raw = {r["kind"]: _med([x["mb_per_s"] for x in _rows(runs, modality=modality,
                                                                  store=store, kind=r["kind"])])
                   for r in _rows(runs, modality=modality, store=store, backend=None)}
            ceiling = max((v["median"] for v in raw.values()), default=None)
            backends = sorted({r["backend"] for r in _rows(runs, modality=modality)
                               if r["backend"]})
            for backend in backends:
                local = _rows(runs, modality=modality, store=twin, backend=backend,
                              kind="local")
                entry = {"modality": modality, "store": store, "backend": backend,
                         "raw_mb_per_s": raw, "ceiling_mb_per_s": ceiling}
                for kind in ("local", "warm", "cold"):
                    rows = local if kind == "local" else _rows(
                        runs, modality=modality, store=store, backend=backend, kind=kind)
                    if not rows:
                        continue
                    entry[kind] = {"samples_per_s": _med([r["samples_per_s"] for r in rows]),
                                   "cpu_ms": _med([r["cpu_ms_per_sample"] for r in rows])}
                    if kind != "local" and local:
                        entry[kind]["vs_local"] = _med(_per_round(rows, local,
                                                                  "samples_per_s"))
                        entry[kind]["cpu_vs_local"] = _med(_per_round(local, rows,
                                                                      "cpu_ms_per_sample"))
                    if kind == "cold" and all(r.get("cache_bytes") for r in rows):
                        mbs = [r["cache_bytes"] / r["seconds"] / 1e6 for r in rows]
                        entry[kind]["mb_per_s"] = _med(mbs)
                        if ceiling:
                            entry[kind]["vs_ceiling"] = statistics.median(mbs) / ceiling
                out.append(entry)
    return out


def _cell(d: dict | None, digits: int = 0) -> str:
    if not d:
        return "-"
    return f"{d['median']:,.{digits}f} ({d['min']:,.{digits}f}-{d['max']:,.{digits}f})"


def lines(summary: list[dict]) -> list[str]:
    out = ["| modality | store | backend | local /s | warm /s | warm vs local | cold /s | "
           "cold vs local | CPU ms local / warm / cold |",
           "|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        local, warm, cold = e.get("local", {}), e.get("warm", {}), e.get("cold", {})
        cpu = " / ".join(f"{x['cpu_ms']['median']:.3f}" if x else "-"
                         for x in (local, warm, cold))
        out.append(f"| {e['modality']} | {e['store']} | {e['backend']} | "
                   f"{_cell(local.get('samples_per_s'))} | {_cell(warm.get('samples_per_s'))} "
                   f"| {_cell(warm.get('vs_local'), 2)} | {_cell(cold.get('samples_per_s'))} | "
                   f"{_cell(cold.get('vs_local'), 2)} | {cpu} |")
    out += ["", "| modality | store | backend | cold MB/s | raw GET MB/s (threads x MiB) | "
            "cold vs best raw |", "|---|---|---|---|---|---|"]
    for e in summary:
        cold = e.get("cold", {})
        raw = ", ".join(f"{k[4:]}: {v['median']:.1f}" for k, v in e["raw_mb_per_s"].items())
        ratio = cold.get("vs_ceiling")
        out.append(f"| {e['modality']} | {e['store']} | {e['backend']} | "
                   f"{_cell(cold.get('mb_per_s'), 1)} | {raw} | "
                   f"{'-' if ratio is None else f'{ratio:.2f}'} |")
    return out


def print_tables(report: dict) -> None:
    print("\n".join(lines(report["summary"])))
    print(f"\nload during the rounds: {report.get('load')}")
