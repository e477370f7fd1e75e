"""Where does a training step's time go? Run a short training-like loop and name the bottleneck.

    python bench/diagnose.py [--modality image] [--data PATH] [--backend dali|torch]
                             [--config PRESET|PATH] [--workers N] [--steps N] [--warmup N]
                             [--batch-size N] [--size N] [--device cpu|cuda|auto]
                             [--compute-ms X [--compute-kind sleep|busy|matmul]
                              | --model tiny-cnn|resnet18]
                             [--disk-ceiling MB/s] [--json PATH]

The method: time next(loader) in every step, watch the GPU,
and tell disk I/O from CPU preprocessing from configuration. Each step is "wait" (blocked in
next(loader)) then "compute": a synthetic step of --compute-ms (sleep stands for an
accelerator busy while the CPU is free; busy spins a core; matmul multiplies on --device) or
a model forward/backward (--model; resnet18 needs torchvision). Meanwhile it records CPU use
per core, disk read throughput and utilisation from /proc/diskstats for the disk under
--data, what the loader's processes read from storage (/proc/<pid>/io), the bytes workers
hand to the main process (torch backend, estimated from the batch tensors) and, with NVML,
GPU, video-decoder and JPEG-engine utilisation.

The probes watch the timed steps only, not the warm-up. When the data lives on a file
system without a block device (tmpfs, overlay, network) the disk is reported as not
measurable. The parts live in bench/diagnosis/; classify() there turns the evidence into a
verdict (its module docstring lists the rules).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.args import loader_parser  # noqa: E402
from bench.launch import broken_environment  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = loader_parser(__doc__)
    p.add_argument("--config", help="DALI decode preset name or TOML path")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torch)")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=224, help="output size (image)")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    step = p.add_mutually_exclusive_group()
    step.add_argument("--compute-ms", type=float, default=20.0,
                      help="synthetic step length in ms (0: pure loader)")
    step.add_argument("--model", choices=["tiny-cnn", "resnet18"],
                      help="a real forward/backward instead of the synthetic step")
    p.add_argument("--compute-kind", choices=["sleep", "busy", "matmul"],
                   help="synthetic step: default sleep on cpu, matmul on cuda")
    p.add_argument("--disk-ceiling", type=float, help="known disk read ceiling in MB/s")
    p.add_argument("--json", type=Path, help="also write evidence, verdict and steps here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = broken_environment()
    if problem is not None:
        print(f"diagnose.py: {problem}", file=sys.stderr)
        return 1
    from bench.diagnosis.loop import run_diagnosis  # torch and DALI: after --help
    from bench.diagnosis.report import print_report
    from bench.report import write_json
    try:
        report = run_diagnosis(args)
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        print(f"diagnose.py: {exc}", file=sys.stderr)
        return 1
    print_report(report)
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
