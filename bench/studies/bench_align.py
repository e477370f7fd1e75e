"""Benchmark: vectorised `align_to_frames` against the per-frame loop users learned from.

The baseline is the usual per-frame alignment loop: for every frame,
`np.searchsorted` into the IMU timestamps, clamp to the first/last sample at the edges, else
interpolate between the bracketing samples with `alpha = (t - t0) / (t1 - t0 + 1e-8)`.
It is reproduced as written, including the 1e-8 in the denominator, which biases alpha by
about 1e-8 / dt relative (2e-6 at 200 Hz); the equality check allows for exactly that bias,
and also runs the loop once with the epsilon removed, which must agree to rounding (1e-12).
Exit status: 0 ok, 1 numbers differ, 2 speedup below --min-speedup.

    python bench/studies/bench_align.py [--minutes 10] [--imu-hz 200] [--fps 30] [--channels 6]
                                [--repeat 5] [--seed 0] [--json PATH] [--min-speedup X]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from dali_pipes.align import align_to_frames

LOOP_EPS = 1e-8


def align_imu_to_frames(frame_timestamps, imu_timestamps, imu_values, eps=LOOP_EPS):
    """The usual per-frame loop, as commonly written, with the `eps` knob."""
    aligned = np.zeros((len(frame_timestamps), imu_values.shape[1]))
    for i, t in enumerate(frame_timestamps):
        idx = np.searchsorted(imu_timestamps, t)
        if idx == 0:
            aligned[i] = imu_values[0]
        elif idx >= len(imu_timestamps):
            aligned[i] = imu_values[-1]
        else:
            t0, t1 = imu_timestamps[idx - 1], imu_timestamps[idx]
            alpha = (t - t0) / (t1 - t0 + eps)
            aligned[i] = imu_values[idx - 1] * (1 - alpha) + imu_values[idx] * alpha
    return aligned


def make_data(minutes: float, imu_hz: float, fps: float, channels: int, seed: int):
    """Jittered 200 Hz IMU (sorted, as the loop requires) and 30 fps frame times
    that start before and end after the IMU, so both edge branches run."""
    rng = np.random.default_rng(seed)
    duration = minutes * 60.0
    n_imu = int(round(duration * imu_hz))
    dt = 1.0 / imu_hz
    imu_t = np.arange(n_imu) * dt + rng.uniform(-0.2, 0.2, n_imu) * dt + 0.05
    phases = rng.uniform(0, 2 * np.pi, channels)
    freqs = rng.uniform(0.2, 5.0, channels)
    imu_v = np.sin(imu_t[:, None] * 2 * np.pi * freqs + phases) + 0.05 * rng.standard_normal(
        (n_imu, channels))
    frame_t = np.arange(int(round(duration * fps))) / fps
    return frame_t, imu_t, imu_v


def _time(fn, repeat: int) -> tuple[float, object]:
    """Best-of-`repeat` wall time in seconds, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _check_equal(baseline, ours, exact_loop, imu_t, imu_v) -> dict:
    """Max differences: against the loop (bounded by what its 1e-8 epsilon allows)
    and against the same loop with the epsilon removed (rounding only)."""
    diff = float(np.max(np.abs(baseline - ours)))
    step = float(np.max(np.abs(np.diff(imu_v, axis=0))))
    bound = LOOP_EPS / float(np.min(np.diff(imu_t))) * step + 1e-12
    exact = float(np.max(np.abs(exact_loop - ours)))
    return {"max_abs_diff": diff, "allowed": bound, "max_abs_diff_no_eps": exact,
            "same": diff <= bound and exact <= 1e-12}


def run(args) -> dict:
    frame_t, imu_t, imu_v = make_data(args.minutes, args.imu_hz, args.fps, args.channels,
                                      args.seed)
    t_loop, baseline = _time(lambda: align_imu_to_frames(frame_t, imu_t, imu_v),
                             max(1, args.repeat // 2))
    rows = [{"name": "per-frame loop (linear)", "seconds": t_loop}]
    t_vec, (ours, _) = _time(lambda: align_to_frames(frame_t, imu_t, imu_v), args.repeat * 10)
    rows.append({"name": "align_to_frames linear", "seconds": t_vec})
    for method in ("previous", "nearest"):
        secs, _ = _time(lambda method=method: align_to_frames(frame_t, imu_t, imu_v, method=method,
                                                              max_gap=0.02), args.repeat * 10)
        rows.append({"name": f"align_to_frames {method}", "seconds": secs})
    quats = imu_v[:, :4] if imu_v.shape[1] >= 4 else np.tile(imu_v[:, :1], (1, 4))
    secs, _ = _time(lambda: align_to_frames(frame_t, imu_t, quats, method="slerp"),
                    args.repeat * 10)
    rows.append({"name": "align_to_frames slerp", "seconds": secs})
    return {"frames": int(frame_t.size), "imu_samples": int(imu_t.size),
            "channels": int(imu_v.shape[1]), "results": rows, "speedup": t_loop / t_vec,
            "check": _check_equal(baseline, ours, align_imu_to_frames(frame_t, imu_t, imu_v, 0.0),
                                  imu_t, imu_v),
            "env": {"python": platform.python_version(), "numpy": np.__version__,
                    "machine": platform.machine(), "processor": platform.processor()}}


def print_report(report: dict) -> None:
    print(f"{report['minutes']:g} min of {report['imu_hz']:g} Hz IMU: "
          f"{report['imu_samples']} samples x {report['channels']} channels; "
          f"{report['frames']} frames at {report['fps']:g} fps")
    print(f"{'method':<28}{'time (ms)':>12}{'frames/s':>16}")
    for row in report["results"]:
        rate = report["frames"] / row["seconds"]
        print(f"{row['name']:<28}{row['seconds'] * 1e3:>12.2f}{rate:>16,.0f}")
    check = report["check"]
    verdict = "same numbers" if check["same"] else "DIFFERENT NUMBERS"
    print(f"speedup (linear vs loop): {report['speedup']:.0f}x   check: {verdict}: max |diff| "
          f"{check['max_abs_diff']:.1e} (its 1e-8 epsilon allows {check['allowed']:.1e}); "
          f"{check['max_abs_diff_no_eps']:.1e} against the loop without the epsilon")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="stream length (default 10)")
    p.add_argument("--imu-hz", type=float, default=200.0, help="IMU rate (default 200)")
    p.add_argument("--fps", type=float, default=30.0, help="frame rate (default 30)")
    p.add_argument("--channels", type=int, default=6, help="IMU channels (default 6)")
    p.add_argument("--repeat", type=int, default=5, help="timing repeats, best kept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the report here")
    p.add_argument("--min-speedup", type=float, default=None,
                   help="exit with status 2 if the speedup is below this")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    report = run(args)
    report.update(minutes=args.minutes, imu_hz=args.imu_hz, fps=args.fps)
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    if not report["check"]["same"]:
        return 1
    if args.min_speedup is not None and report["speedup"] < args.min_speedup:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
