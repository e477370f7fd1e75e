"""Change one knob at a time, keep a table of samples/s, write the best DALI setting as a preset.

    python bench/tune.py [--modality image] [--data PATH] [--backend dali|torch]
                         [--params num_threads,prefetch_queue_depth,...]
                         [--values num_threads=1,2,4] ... [--steps N] [--warmup N]
                         [--batch-size N] [--size N] [--base-config PRESET|PATH]
                         [--workers N] [--device cpu|cuda|auto]
                         [--json PATH] [--plot PATH.png] [--out-preset PATH.toml]

A rule of tuning: never change several variables at once. Parameters
are swept in the order given; each one is swept with every other knob at its current best,
and its best value is kept before the next parameter (one-at-a-time coordinate search).
Every setting is measured in its own process (bench/run_one.py's measure), so threads,
workers and memory of one setting never leak into the next.

DALI parameters: num_threads, prefetch_queue_depth, hw_decoder_load (GPU only: skipped with a
note on CPU), py_num_workers, batch_size. Torch: num_workers, prefetch_factor, batch_size.
Each setting runs --repeats times (default 3): the table shows the median samples/s and the
min-max spread, and a best whose range overlaps the runner-up's is called "within noise".
--out-preset writes only the keys the sweep measured (plus the base preset's keys that differ
from the defaults, named in a comment) as TOML that make_loader(config=PATH) accepts; batch
size is not a preset key and is noted as a comment.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))

from bench.args import loader_parser  # noqa: E402
from bench.launch import broken_environment, run_round  # noqa: E402

SWEEPS = {"dali": {"num_threads": [1, 2, 4], "prefetch_queue_depth": [1, 2, 3],
                   "hw_decoder_load": [0.0, 0.5, 0.9], "py_num_workers": [0, 2],
                   "batch_size": [16, 32, 64]},
          "torch": {"num_workers": [0, 1, 2, 4], "prefetch_factor": [1, 2, 4],
                    "batch_size": [16, 32, 64]}}
DEFAULT_PARAMS = {"dali": ["num_threads", "prefetch_queue_depth", "hw_decoder_load"],
                  "torch": ["num_workers", "prefetch_factor"]}


def parse_args(argv=None) -> argparse.Namespace:
    p = loader_parser(__doc__)
    p.add_argument("--params", help="comma-separated parameters to sweep, in order")
    p.add_argument("--values", action="append", default=[], metavar="NAME=V1,V2",
                   help="values for one parameter (repeatable); defaults in SWEEPS")
    p.add_argument("--steps", type=int, default=20, help="timed steps per setting")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="runs per setting (default 3): "
                   "the median ranks settings, the min-max spread says what is noise")
    p.add_argument("--batch-size", type=int, default=32, help="starting batch size")
    p.add_argument("--size", type=int, default=224, help="output size (image)")
    p.add_argument("--base-config", default="default", help="DALI preset to start from")
    p.add_argument("--workers", type=int, default=2, help="starting DataLoader workers")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--json", type=Path)
    p.add_argument("--plot", type=Path, help="PNG: samples/s against each swept value")
    p.add_argument("--out-preset", type=Path, help="write the best DALI setting here")
    p.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure one setting
    return p.parse_args(argv)


def sweep_plan(args, device: str) -> tuple[list[tuple[str, list]], list[str]]:
    """(parameter, values) pairs to sweep, and notes on what was skipped and why."""
    known = SWEEPS[args.backend]
    names = args.params.split(",") if args.params else DEFAULT_PARAMS[args.backend]
    given = {}
    for item in args.values:
        name, _, values = item.partition("=")
        if name not in known or not values:
            raise ValueError(f"--values {item!r}: expected NAME=V1,V2 with NAME one of "
                             f"{sorted(known)} for backend {args.backend}")
        kind = float if name == "hw_decoder_load" else int
        given[name] = [kind(v) for v in values.split(",")]
    plan, notes = [], []
    for name in names:
        if name not in known:
            raise ValueError(f"--params: unknown parameter {name!r} for backend "
                             f"{args.backend}; known: {sorted(known)}")
        if name == "hw_decoder_load" and not device.startswith("cuda"):
            notes.append("hw_decoder_load skipped: it only affects GPU (mixed) decoding")
            continue
        plan.append((name, given.get(name, known[name])))
    return plan, notes


def measure_setting(spec: dict) -> dict:
    """Run one setting in a process of its own (forked from the server of bench/launch.py,
    or a fresh interpreter); its result dict (samples_per_s, waits...)."""
    result, code, err = run_round(["--child", json.dumps(spec)], lambda done: None,
                                  entry="bench.tune")
    if code != 0 or result is None:
        raise RuntimeError(f"setting {spec['setting']} failed (exit {code}):\n{err[-3000:]}")
    return result


def _child(spec: dict) -> int:
    """Child process: build the loader the spec describes and time it with run_one.measure."""
    import bench.run_one as run_one
    from torch_bridge import make_loader

    def build(backend, a):
        extra = {"size": a.size} if a.modality == "image" else {}
        if backend == "dali":
            extra["config"] = spec["config"]
        else:
            extra["reference"] = spec["reference"]
        return make_loader(a.modality, a.data, backend=backend, batch_size=a.batch_size,
                           device=a.device, seed=0, **extra)

    run_one.build = build  # run_one's own timing loop, our loader options
    fields = ("modality", "data", "batch_size", "steps", "warmup", "device", "size")
    args = argparse.Namespace(**{k: spec[k] for k in fields})
    result = run_one.measure(spec["backend"], args)
    print(json.dumps({"event": "result", **result}), flush=True)
    return 0


def _spec(args, data, device, state: dict, param: str, value) -> dict:
    setting = {**state, param: value}
    config_keys = set(_config_values(_config_class()()))
    config = {**state["config"], **{k: v for k, v in setting.items() if k in config_keys}}
    reference = {k: setting[k] for k in ("num_workers", "prefetch_factor") if k in setting}
    return {"backend": args.backend, "modality": args.modality, "data": str(data),
            "batch_size": setting["batch_size"], "steps": args.steps, "warmup": args.warmup,
            "device": device, "size": args.size, "config": config, "reference": reference,
            "setting": {param: value}}


def _config_class():
    from dali_pipes.pipelines.config import PipelineConfig
    return PipelineConfig


def _config_values(config) -> dict:
    """A PipelineConfig's settings by preset key (flat)."""
    from dali_pipes.pipelines.config import config_values
    return config_values(config)


def sweep(args, data, device: str, plan, on_done) -> tuple[list[dict], dict]:
    """Coordinate search: rows of the table, and the final state (best of each knob)."""
    from dali_pipes.pipelines.config import load_config
    state = {"config": _config_values(load_config(args.base_config)),
             "batch_size": args.batch_size, "num_workers": args.workers}
    rows = []
    for param, values in plan:
        if param == "prefetch_factor" and state["num_workers"] == 0:
            rows.append({"param": param, "value": None, "skipped": "num_workers is 0"})
            continue
        mine = [measure_repeated(args, _spec(args, data, device, state, param, value),
                                 param, value, on_done) for value in values]
        mark_best(mine)
        rows += mine
        best = next(r["value"] for r in mine if r.get("best"))
        if param in state["config"]:
            state["config"][param] = best
        else:
            state[param] = best
    return rows, state


def measure_repeated(args, spec: dict, param: str, value, on_done) -> dict:
    """One table row: the setting measured `args.repeats` times (medians, min-max)."""
    import numpy as np
    runs = []
    for _ in range(max(1, getattr(args, "repeats", 1))):
        runs.append(measure_setting(spec))
        on_done()
    rates = [r["samples_per_s"] for r in runs]
    row = {"param": param, "value": value, "repeats": len(runs),
           "samples_per_s_range": [float(min(rates)), float(max(rates))]}
    for key in ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "cpu_percent"):
        values = [r[key] for r in runs if r.get(key) is not None]
        row[key] = float(np.median(values)) if values else None
    return row


def mark_best(rows: list[dict]) -> None:
    """Mark the row with the highest median samples/s "best"; say "within noise" (and set
    `within_noise`) when its min-max range overlaps the runner-up's.

    Args:
        rows: one parameter's rows (samples_per_s, samples_per_s_range); changed in place.
    """
    ranked = sorted(rows, key=lambda r: r["samples_per_s"], reverse=True)
    best = ranked[0]
    best["best"] = True
    best["within_noise"] = False
    if len(ranked) > 1:
        runner = ranked[1]
        best["within_noise"] = best["samples_per_s_range"][0] <= \
            runner["samples_per_s_range"][1]
        best["runner_up"] = runner["value"]


def preset_keys(report: dict) -> list[str]:
    """The keys --out-preset writes: the config keys the sweep measured, plus the base
    preset's keys that differ from the defaults (without them the preset would not describe
    the measured setting). Sets report["measured"].

    Args:
        report: run()'s report (rows, best.config, base_config).
    Returns:
        PipelineConfig field names, in the config's order.
    """
    from dali_pipes.pipelines.config import PipelineConfig
    config = report["best"]["config"]
    swept = {r["param"] for r in report["rows"] if r.get("value") is not None}
    report["measured"] = [k for k in config if k in swept]
    defaults = _config_values(PipelineConfig())
    return [k for k in config if k in swept or config[k] != defaults[k]]


def write_preset(path: Path, config: dict, comment: str) -> None:
    """Write `config` (some or all PipelineConfig fields) as a preset TOML; check it loads
    and that every written key reads back (unwritten keys take PipelineConfig defaults)."""
    from dali_pipes.pipelines.config import load_config

    def value(v):
        return ("true" if v else "false") if isinstance(v, bool) else repr(v)
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append('description = "Tuned by bench/tune.py, one knob at a time."')
    lines += [f"{k} = {value(v)}" for k, v in config.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    loaded = _config_values(load_config(path))  # raises ValueError naming the file
    if {k: loaded[k] for k in config} != config:
        raise ValueError(f"{path}: preset reads back as {loaded}, expected {config}")


def _verdict(r: dict) -> str:
    if not r.get("best"):
        return ""
    if r.get("within_noise"):
        return f"best, within noise of {r['runner_up']}"
    return "best"


def noise_notes(rows: list[dict]) -> list[str]:
    """One note per parameter whose best value is within noise of the runner-up."""
    return [f"{r['param']}: best {r['value']} is within noise of {r['runner_up']} (their "
            f"min-max ranges overlap); measure again with more --repeats or --steps"
            for r in rows if r.get("within_noise")]


def print_table(rows: list[dict], title: str) -> None:
    """The sweep table: median samples/s, its min-max over the repeats, and the verdict."""
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title)
    for name in ("parameter", "value", "samples/s", "min-max", "wait p50 ms", "CPU %", ""):
        table.add_column(name, justify="left" if name in ("parameter", "") else "right")
    for r in rows:
        if "skipped" in r:
            table.add_row(r["param"], "-", f"skipped: {r['skipped']}", "", "", "", "")
            continue
        lo, hi = r["samples_per_s_range"]
        table.add_row(r["param"], str(r["value"]), f"{r['samples_per_s']:,.1f}",
                      f"{lo:,.0f}-{hi:,.0f}", f"{r['wait_ms_p50']:.1f}",
                      f"{r['cpu_percent']:.0f}", _verdict(r))
    Console(width=None if Console().is_terminal else 100).print(table)


def run(args) -> dict:
    from bench.compare import resolve_device, sample_data
    from dali_pipes.progress import progress_bar
    device = resolve_device(args.device)
    data = Path(args.data) if args.data else sample_data(args.modality)
    plan, notes = sweep_plan(args, device)
    total = sum(len(v) for _, v in plan) * max(1, args.repeats)
    with progress_bar(total, f"tuning {args.backend}", unit="runs", transient=True) as bar:
        rows, state = sweep(args, data, device, plan, bar.advance)
    best = {"batch_size": state["batch_size"]}
    best.update({"config": state["config"]} if args.backend == "dali" else
                {k: state[k] for k in ("num_workers", "prefetch_factor") if k in state})
    return {"backend": args.backend, "modality": args.modality, "device": device,
            "data": str(data), "steps": args.steps, "repeats": args.repeats, "rows": rows,
            "best": best, "base_config": args.base_config,
            "notes": notes}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        return _child(json.loads(args.child))
    problem = broken_environment()  # before any setting's process is forked
    if problem is not None:
        print(f"tune.py: {problem}", file=sys.stderr)
        return 1
    try:
        if args.backend == "dali":  # compiled once here, not inside a timed child
            from bench.first_run import build_native
            build_native(lambda line: print(line, file=sys.stderr, flush=True))
        report = run(args)
        print_table(report["rows"], f"{args.backend} on {report['device']}: one knob at a time")
        for note in report["notes"] + noise_notes(report["rows"]):
            print(f"note: {note}")
        _outputs(args, report)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"tune.py: {exc}", file=sys.stderr)
        return 1
    return 0


def _outputs(args, report: dict) -> None:
    if args.plot:
        from bench.plots import plot_sweep
        plot_sweep(report["rows"], args.plot, title=f"{args.backend} on {report['device']}")
    if args.out_preset:
        if args.backend != "dali":
            raise ValueError("--out-preset writes a DALI decode preset; use --backend dali")
        _write_best_preset(args, report)
        report["preset"] = str(args.out_preset)
        print(f"preset written: {args.out_preset}")
    if args.json:
        from bench.report import write_json
        write_json(args.json, report)


def _write_best_preset(args, report: dict) -> None:
    """--out-preset: the measured keys (and the base preset's non-default ones), commented."""
    keys = preset_keys(report)
    measured = report["measured"]
    lines = [f"keys measured by tune.py: {', '.join(measured) or 'none'}"]
    inherited = [k for k in keys if k not in measured]
    if inherited:
        lines.append(f"from base preset {args.base_config} (not measured): "
                     f"{', '.join(inherited)}")
    batch = report["best"]["batch_size"]
    lines.append(f"best batch size measured: {batch} (not a preset key: pass batch_size= "
                 "to make_loader)")
    lines.append(f"steps per setting: {args.steps} x {args.repeats} runs, device "
                 f"{report['device']}, data {report['data']}")
    config = report["best"]["config"]
    write_preset(args.out_preset, {k: config[k] for k in keys}, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
