"""compare.py's measuring rounds: each backend in a process of its own (bench/launch.py),
rounds interleaved, medians (and the min-max) over them; a backend that fails is reported in
one line (its last exception line, or the signal that killed it) and left out of the later
rounds."""
from __future__ import annotations

import re
from pathlib import Path

from bench.launch import run_round
from bench.report import fit

METRICS = ("samples_per_s", "wait_ms_p50", "wait_ms_p95", "cpu_percent", "gpu_util_percent",
           "peak_rss_mb", "cpu_ms_per_sample")
# the last line of a Python traceback: "pkg.mod.SampleError: sample 3 (...): ..."
EXCEPTION_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*)\w*(Error|Exception|Exit|Interrupt)(:|$)")
SPREAD = ("samples_per_s", "cpu_ms_per_sample")  # reported as [min, max] over rounds


def run_backend(backend: str, args, data: Path, device: str, on_step) -> dict:
    """One round of one backend in its own process (run_one.py): its result dict.

    Raises:
        BackendFailed: the child exited non-zero or gave no result; `cause` is the last
            exception line of its stderr.
    """
    name, _, preset = backend.partition(":")
    cmd = ["--backend", name, "--modality", args.modality, "--data", str(data), "--batch-size",
           str(args.batch_size), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--device", device, "--size", str(args.size), "--workers", str(args.workers),
           "--threads", str(args.threads), "--on-error", getattr(args, "on_error", "raise"),
           "--prebuilt"]
    if preset or args.config:
        cmd += ["--config", preset or args.config]
    if getattr(args, "recipe", None):
        cmd += ["--recipe", args.recipe]
    if getattr(args, "stages", False):
        cmd.append("--stages")
    if getattr(args, "options", None):
        cmd += ["--options", args.options]
    result, code, err = run_round(cmd, on_step)
    if code != 0 or result is None:
        cause = last_error_line(err)
        if code is not None and code < 0 and cause == "no error output":
            cause = f"killed by signal {_signal_name(-code)}"
        raise BackendFailed(backend, code, cause)
    result.pop("event")
    result["backend"] = backend
    return result


def _signal_name(number: int) -> str:
    import signal
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:
        return str(number)


class BackendFailed(RuntimeError):
    """A backend's measuring process failed; `cause` is one line saying why."""

    def __init__(self, backend: str, code: int, cause: str):
        super().__init__(f"backend {backend!r} failed (exit {code}): {cause}")
        self.backend, self.code, self.cause = backend, code, cause


def last_error_line(stderr: str) -> str:
    """The child's last exception line ("SampleError: sample 3 (/x/a.jpg): ..."), else its
    last non-empty stderr line, else "no error output"."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    for line in reversed(lines):
        match = EXCEPTION_LINE.match(line)
        if match:  # "torch_bridge.errors.SampleError: ..." -> "SampleError: ..."
            return line[len(match.group(1)):][:300]
    return lines[-1][:300] if lines else "no error output"


def run_all(args, data: Path, device: str, backends: list[str]) -> list[dict]:
    """Interleaved rounds of every backend; the median result per backend. A backend that
    fails is reported (one line, on stderr) and left out of later rounds; its row then holds
    "error" instead of measures. The progress display gets its total, and with it an ETA,
    once every backend has run a round: the first steps of a first round (the fork server
    starting, each loader's first build) are far slower than the rest."""
    from dali_pipes.progress import progress_bar

    rounds: dict[str, list[dict]] = {b: [] for b in backends}
    failed: dict[str, str] = {}
    total = args.repeats * len(backends) * args.steps
    with progress_bar(None, "measuring", unit="steps", transient=True) as bar:
        for r in range(args.repeats):
            if r == 1:
                bar.update(bar.done, total=total)
            for backend in backends:
                if backend in failed:
                    bar.advance(args.steps)
                    continue
                base = bar.done
                bar.print(f"{backend} (round {r + 1} of {args.repeats})")
                try:
                    rounds[backend].append(run_backend(
                        backend, args, data, device,
                        lambda done, b=base: bar.update(b + done)))
                except BackendFailed as exc:
                    failed[backend] = exc.cause
                    bar.print(fit(f"compare.py: {backend} failed: {exc.cause}"))
                bar.update(base + args.steps)
    return [median_row(rounds[b]) if b not in failed else {"backend": b, "error": failed[b]}
            for b in backends]


def median_row(results: list[dict]) -> dict:
    """One backend's row from its rounds: the median of each metric, the range of the
    noisy ones, the median stages."""
    import numpy as np
    out = dict(results[0])
    for key in METRICS:
        values = [r[key] for r in results if r.get(key) is not None]
        out[key] = float(np.median(values)) if values else None
        if key in SPREAD:
            out[f"{key}_range"] = [float(min(values)), float(max(values))] if values else None
    if "stages" in out:  # --stages: the median of each stage too
        from bench.stages import median_stages
        out["stages"] = median_stages([r["stages"] for r in results])
    out["repeats"] = len(results)
    return out
