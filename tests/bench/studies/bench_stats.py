"""The cost of the live statistics (loader.stats()): loaders with the counters on and off,
interleaved rounds on the built-in image set, and the per-batch cost of the counting calls.

    python tests/bench/studies/bench_stats.py [--backend dali|torch] [--rounds 5] [--epochs 2]

"off" sets the loader's counters disabled (every record call returns at once); the clock
reads at the stage boundaries stay, so the per-batch microbenchmark below gives the cost
of those too. Results go in docs/stats.md. Switching the counters off reaches into the
loader's internals, so the study lives beside the tests rather than in bench/.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from time import perf_counter_ns

import numpy as np

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[3]))  # after PYTHONPATH


def epoch_rate(loader, epochs: int) -> tuple[float, float]:
    """(samples per second, CPU ms of this process per sample) over `epochs` passes (the
    CPU time counts DALI's threads; it is less disturbed by other processes than the wall
    time)."""
    samples, t0, c0 = 0, time.perf_counter(), time.process_time()
    for _ in range(epochs):
        for batch in loader:
            samples += len(batch["index"])
    cpu_ms = (time.process_time() - c0) * 1e3 / samples
    return samples / (time.perf_counter() - t0), cpu_ms


def counting_cost_ns(n: int = 20000) -> float:
    """Per batch: what the loader and the DALI engine add (clock reads and records)."""
    from torch_bridge.stats import LoaderStats
    stats = LoaderStats()
    stats.sizes = np.arange(1000, dtype=np.int64)
    kept = np.arange(64, dtype=np.int64)
    stats.begin(0, 0, 0)
    t0 = perf_counter_ns()
    for _ in range(n):
        a = perf_counter_ns()  # loader: before and after the engine's yield
        b = perf_counter_ns()  # engine: feed, outputs, transfer boundaries
        perf_counter_ns(), perf_counter_ns(), perf_counter_ns(), perf_counter_ns()
        stats.add("feed", b - a)
        stats.add("dali_run", b - a)
        stats.add("transfer", b - a)
        stats.yielded(kept, 2)
        stats.batch(b - a)
    return (perf_counter_ns() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="dali", choices=("dali", "torch"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    from bench.compare import sample_data
    from torch_bridge import make_loader
    data = sample_data("image")
    loaders = {}
    for mode in ("on", "off"):
        loaders[mode] = make_loader("image", str(data), backend=args.backend,
                                    batch_size=args.batch_size)
        loaders[mode]._stats.enabled = mode == "on"  # the switch the measurement needs
        epoch_rate(loaders[mode], 1)  # warm-up: pipeline built, workers started
    ratios, cpu_ratios = [], []
    for r in range(args.rounds):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        got = {mode: epoch_rate(loaders[mode], args.epochs) for mode in order}
        ratios.append(got["on"][0] / got["off"][0])
        cpu_ratios.append(got["on"][1] / got["off"][1])
        print(f"round {r + 1}: on {got['on'][0]:.1f} samples/s {got['on'][1]:.3f} CPU-ms/"
              f"sample, off {got['off'][0]:.1f} samples/s {got['off'][1]:.3f} CPU-ms/sample")
    for name, values in (("samples/s on/off", ratios), ("CPU per sample on/off", cpu_ratios)):
        print(f"{name}: median {statistics.median(values):.4f} (min {min(values):.4f}, "
              f"max {max(values):.4f}) over {args.rounds} rounds")
    cost = counting_cost_ns()
    per_batch_ms = args.batch_size / loaders["on"].stats()["last"]["samples_per_s"] * 1e3
    print(f"counting calls per batch: {cost / 1e3:.2f} us, {100 * cost / 1e6 / per_batch_ms:.4f}% "
          f"of a batch ({per_batch_ms:.1f} ms)")
    for loader in loaders.values():
        loader.close()


if __name__ == "__main__":
    main()
