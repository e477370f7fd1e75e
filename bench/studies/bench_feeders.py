"""Feed workers (`py_num_workers`) side by side: 0 against N, interleaved rounds, medians.

    python bench/studies/bench_feeders.py [--cases video-h264,video-vp9,hyperspectral]
                                  [--workers 0,1,2] [--rounds 3] [--steps N]
                                  [--step-ms 0] [--json PATH]

Each (case, workers) runs in its own process, one after the other, round after round, on
the built-in sample data (created once and cached; "video-h264" is the video sample encoded
with libx264, which DALI cannot decode on the CPU, so every clip goes through the PyAV
fallback in `feeds()`). `--step-ms` adds a simulated training step that leaves the CPU free
(a sleep, as while a GPU computes): the time Python-side reading can hide in. Reported:
samples/s, the loop's wait in next() (p50), CPU use of the process and its children, and
the ratio of samples/s to workers = 0 in the same round.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CASES = {  # case: (modality, make_loader options, timed steps unless --steps is given)
    "video-h264": ("video", {"batch_size": 8, "clip_length": 8, "size": 112}, 30),
    "video-vp9": ("video", {"batch_size": 8, "clip_length": 8, "size": 112}, 30),
    "hyperspectral": ("hyperspectral", {"batch_size": 64, "patch_size": 9}, 300),
}


def sample_data(case: str) -> Path:
    from dali_pipes.sample_data.sample_hyperspectral import hyperspectral_dataset
    from dali_pipes.sample_data.sample_images import cache_root
    from dali_pipes.sample_data.sample_video import small_video_folder, video_dataset
    if case == "hyperspectral":
        return hyperspectral_dataset()
    if case == "video-vp9":
        return video_dataset()
    key = hashlib.sha1(repr((48, 4, (160, 120), (48, 64, 80, 96), 0)).encode()).hexdigest()
    base = cache_root() / f"videos-h264-48x160x120-{key[:10]}"
    if not (base / ".complete").exists():
        small_video_folder(base, n_videos=48, n_classes=4, frames=(48, 64, 80, 96),
                           size=(160, 120), codec="libx264")
        (base / ".complete").write_text("ok\n")
    return base


def measure_one(case: str, data: str, workers: int, steps: int, warmup: int,
                step_ms: float) -> dict:
    """Run one loader in this process; samples/s, wait p50 (ms), CPU % (with children)."""
    import psutil

    from torch_bridge import make_loader
    modality, options, _ = CASES[case]
    loader = make_loader(modality, data, config={"py_num_workers": workers}, seed=0,
                         **options)
    batches = (b for _ in iter(int, 1) for b in loader)  # as many epochs as needed
    for _ in range(warmup):
        next(batches)
    me = psutil.Process()
    cpu0, waits, samples = _cpu(me), [], 0
    start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = next(batches)
        waits.append(time.perf_counter() - t0)
        samples += len(batch["index"])
        time.sleep(step_ms / 1000)
    elapsed = time.perf_counter() - start
    cpu = (_cpu(me) - cpu0) / elapsed * 100
    loader.close()
    return {"case": case, "workers": workers, "samples_per_s": samples / elapsed,
            "wait_ms_p50": float(np.median(waits) * 1000), "cpu_percent": cpu}


def _cpu(proc) -> float:
    times = proc.cpu_times()
    kids = sum(c.cpu_times().user + c.cpu_times().system for c in proc.children())
    return times.user + times.system + kids


def run_rounds(args) -> list[dict]:
    results = []
    data = {case: sample_data(case) for case in args.cases}
    for r in range(args.rounds):
        for case in args.cases:
            for workers in args.workers:
                cmd = [sys.executable, __file__, "--one", case, "--data", str(data[case]),
                       "--one-workers", str(workers),
                       "--steps", str(args.steps or CASES[case][2]),
                       "--warmup", str(args.warmup), "--step-ms", str(args.step_ms)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"{case} workers={workers} failed:\n{out.stderr[-3000:]}")
                results.append({**json.loads(out.stdout.strip().splitlines()[-1]), "round": r})
                print(f"round {r + 1} {case:14} workers={workers}: "
                      f"{results[-1]['samples_per_s']:8.1f} samples/s", file=sys.stderr)
    return results


def summary(results: list[dict], cases, workers) -> list[dict]:
    """Medians per (case, workers), and the median over rounds of the ratio to 0 workers."""
    rows = []
    for case in cases:
        base = {r["round"]: r["samples_per_s"] for r in results
                if r["case"] == case and r["workers"] == workers[0]}
        for n in workers:
            mine = [r for r in results if r["case"] == case and r["workers"] == n]
            rows.append({"case": case, "workers": n, **{
                key: float(np.median([r[key] for r in mine]))
                for key in ("samples_per_s", "wait_ms_p50", "cpu_percent")},
                "ratio": float(np.median([r["samples_per_s"] / base[r["round"]]
                                          for r in mine]))})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="video-h264,hyperspectral")
    p.add_argument("--workers", default="0,1,2", help="py_num_workers values; the first "
                   "is the baseline of the ratio")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, help="timed steps (default: 30 for video, 300 "
                   "for hyperspectral)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--step-ms", type=float, default=0.0)
    p.add_argument("--json", type=Path)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--one-workers", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args.one, args.data, args.one_workers, args.steps,
                                     args.warmup, args.step_ms)))
        return 0
    args.cases = args.cases.split(",")
    args.workers = [int(w) for w in args.workers.split(",")]
    results = run_rounds(args)
    rows = summary(results, args.cases, args.workers)
    print(f"{'case':14} {'workers':>7} {'samples/s':>10} {'ratio':>6} {'wait p50 ms':>11} "
          f"{'cpu %':>6}")
    for row in rows:
        print(f"{row['case']:14} {row['workers']:7d} {row['samples_per_s']:10.1f} "
              f"{row['ratio']:6.2f} {row['wait_ms_p50']:11.1f} {row['cpu_percent']:6.0f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "runs": results, "settings": {
            "steps": args.steps, "warmup": args.warmup, "step_ms": args.step_ms,
            "rounds": args.rounds}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
