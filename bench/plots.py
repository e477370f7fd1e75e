"""PNG plots for the benchmarks (matplotlib, Agg backend: no display needed).

plot_compare(report, path): compare.py's throughput per backend and data-wait distributions.
plot_sweep(rows, path): tune.py's samples/s against each swept parameter's values.
"""
from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def plot_compare(report: dict, path) -> Path:
    """Left: samples/s per backend. Right: data wait per step: a box plot where a result
    holds per-step waits ("waits_ms"), otherwise p50 bars with a p95 whisker."""
    plt = _pyplot()
    results = report["results"]
    names = [r["backend"] for r in results]
    fig, (ax_rate, ax_wait) = plt.subplots(1, 2, figsize=(11, 4.2))
    bars = ax_rate.bar(names, [r["samples_per_s"] for r in results], color="tab:blue")
    ax_rate.bar_label(bars, fmt="%.0f", fontsize=8)
    ax_rate.set_ylabel("samples/s")
    ax_rate.set_title(f"{report['modality']} on {report['device']}: throughput")
    if all(r.get("waits_ms") for r in results):
        ax_wait.boxplot([r["waits_ms"] for r in results], labels=names, showfliers=True)
    else:
        p50 = [r["wait_ms_p50"] for r in results]
        p95 = [r["wait_ms_p95"] for r in results]
        ax_wait.bar(names, p50, color="tab:orange", label="p50")
        above = [b - a for a, b in zip(p50, p95, strict=True)]
        ax_wait.errorbar(names, p50, yerr=[[0] * len(p50), above],
                         fmt="none", ecolor="black", capsize=4, label="to p95")
        ax_wait.legend(fontsize=8)
    ax_wait.set_ylabel("wait in next(loader), ms")
    ax_wait.set_title("data wait per step")
    for ax in (ax_rate, ax_wait):
        ax.tick_params(axis="x", rotation=30)
    return _save(fig, path)


def plot_sweep(rows: list[dict], path, *, title: str = "") -> Path:
    """One panel and one line per swept parameter: samples/s against its values (median,
    with the min-max over the repeats as error bars where the rows have it)."""
    plt = _pyplot()
    params = list(dict.fromkeys(r["param"] for r in rows if r.get("value") is not None))
    if not params:
        raise ValueError("plot_sweep: no measured rows to plot")
    fig, axes = plt.subplots(1, len(params), figsize=(4.2 * len(params), 3.6), squeeze=False)
    for ax, param in zip(axes[0], params, strict=True):
        mine = [r for r in rows if r["param"] == param and r.get("value") is not None]
        xs = [r["value"] for r in mine]
        ys = [r["samples_per_s"] for r in mine]
        ax.plot(xs, ys, marker="o", label=param)
        if all(r.get("samples_per_s_range") for r in mine):  # min-max over the repeats
            lo = [y - r["samples_per_s_range"][0] for y, r in zip(ys, mine, strict=True)]
            hi = [r["samples_per_s_range"][1] - y for y, r in zip(ys, mine, strict=True)]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="gray", capsize=3)
        best = max(range(len(ys)), key=ys.__getitem__)
        ax.annotate(f"best {xs[best]}", (xs[best], ys[best]), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xlabel(param)
        ax.set_ylabel("samples/s")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return _save(fig, path)
