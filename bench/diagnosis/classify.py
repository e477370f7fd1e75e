"""The verdict: measured evidence in, bottleneck, evidence lines and next step out. Pure.

Rules, checked in this order (first match wins):
  wait_fraction < compute_wait                                       -> "compute"
  disk busy: util >= disk_util, or read MB/s >= disk_ceiling_fraction x the known ceiling,
      and (when measured) the loader's own processes did those reads: at least
      disk_own_share of the device's read bytes and disk_own_min_mb_s      -> "disk"
  mean core busy >= cpu_busy, or loader tree CPU >= cpu_busy % of all cores -> "cpu"
  wait_fraction < balanced_wait                                      -> "balanced"
  otherwise (waiting while CPU and disk idle)                        -> "transfer" (IPC / config)
For "cpu", when the loader's processes used under half of the busy CPU the advice is to
measure without the other processes first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

THRESHOLDS = MappingProxyType({
    "compute_wait": 0.10, "balanced_wait": 0.25, "disk_util": 80.0,
    "disk_ceiling_fraction": 0.8, "disk_own_share": 0.5, "disk_own_min_mb_s": 1.0,
    "cpu_busy": 85.0})


@dataclass
class Evidence:
    """What one diagnosis run measured. Percentages are 0-100; None means not measured."""

    wait_fraction: float  # time in next(loader) over the whole step time
    wait_ms_p50: float = 0.0
    wait_ms_p95: float = 0.0
    compute_ms_p50: float = 0.0
    samples_per_s: float = 0.0
    cpu_cores: list[float] = field(default_factory=list)  # busy % per core, whole machine
    process_cpu_percent: float = 0.0  # loader process tree; 200 = two busy cores
    disk_device: str | None = None  # None: no block device under the data (see disk_note)
    disk_note: str | None = None  # why the disk is not measurable, when it is not
    disk_read_mb_s: float | None = None  # the whole device, every process
    disk_util_percent: float | None = None
    disk_ceiling_mb_s: float | None = None
    loader_read_mb_s: float | None = None  # read from storage by the loader's processes
    transfer_mb_s: float | None = None  # worker -> main process; None: no worker processes
    gpu_util_percent: float | None = None
    decoder_util_percent: float | None = None
    jpeg_util_percent: float | None = None
    backend: str = "dali"
    device: str = "cpu"
    stage_ms: dict[str, float] = field(default_factory=dict)  # loader.stats() stages, summed
    bytes_read_mb_s: float | None = None  # sample bytes the loader read (its counters)

    @property
    def machine_cpu_percent(self) -> float:
        return sum(self.cpu_cores) / len(self.cpu_cores) if self.cpu_cores else 0.0

    @property
    def loader_cpu_share(self) -> float:
        """The loader tree's CPU as a percentage of the whole machine's."""
        return self.process_cpu_percent / max(1, len(self.cpu_cores))

    @property
    def cpu_busy_percent(self) -> float:
        return max(self.machine_cpu_percent, self.loader_cpu_share)


@dataclass(frozen=True)
class Diagnosis:
    bottleneck: str  # "disk" | "cpu" | "transfer" | "compute" | "balanced"
    evidence: list[str]
    next_step: str


ADVICE = MappingProxyType({
    "compute": "The loader keeps up: the step itself is the limit. Speed up the model (AMP, "
               "channels_last, torch.compile, a larger batch); loader tuning will not help.",
    "disk": "Storage is saturated: keep the data set in RAM or the page cache, move it to "
            "faster local storage, pack small files into larger shards, or use fewer "
            "concurrent random readers; more decode threads will not help.",
    "cpu:dali:cpu": "Decoding and augmentation use every core: decode on the GPU "
                    "(--device cuda), try the 'throughput' preset (no antialiasing), or "
                    "shrink the output size; then bench/tune.py --params num_threads.",
    "cpu:dali:cuda": "The CPU side of DALI is saturated: raise hw_decoder_load so the "
                     "hardware JPEG decoder takes more images, and sweep num_threads with "
                     "bench/tune.py.",
    "cpu:others": "Other processes keep the cores busy; the loader uses under half of "
                  "that CPU. Measure on an otherwise idle machine, or give the training job "
                  "cores of its own (taskset, a cgroup cpuset), before tuning the loader.",
    "cpu:torch": "The DataLoader workers use every core: switch to the DALI backend "
                 "(GPU decoding), or lower per-sample CPU work (smaller crops).",
    "transfer:torch": "Waiting while CPU and disk are idle: too few workers or too little "
                      "prefetch, or worker->main transfer. Raise num_workers, then "
                      "prefetch_factor (bench/tune.py --backend torch); keep "
                      "persistent_workers and pin_memory on.",
    "transfer:dali": "Waiting while CPU and disk are idle: too few DALI threads or too "
                     "shallow a prefetch queue. Sweep num_threads and prefetch_queue_depth "
                     "with bench/tune.py (py_num_workers for modalities read in Python).",
    "balanced": "Data and compute are close to balanced; sweep one knob at a time with "
                "bench/tune.py and keep the table of samples/s.",
})


def _advice(label: str, ev: Evidence) -> str:
    if label == "cpu" and ev.loader_cpu_share < 0.5 * ev.machine_cpu_percent:
        return ADVICE["cpu:others"]
    device = "cuda" if ev.device.startswith("cuda") else "cpu"
    for key in (f"{label}:{ev.backend}:{device}", f"{label}:{ev.backend}", label):
        if key in ADVICE:
            return ADVICE[key]
    return ADVICE["balanced"]


def _loader_did_the_reads(ev: Evidence, t) -> tuple[bool, list[str]]:
    """Whether the device's reads were the loader's own (True when that is not measured)."""
    if ev.loader_read_mb_s is None:
        return True, []
    share = ev.loader_read_mb_s / ev.disk_read_mb_s if ev.disk_read_mb_s else 0.0
    own = ev.loader_read_mb_s >= t["disk_own_min_mb_s"] and share >= t["disk_own_share"]
    return own, [f"loader processes read {ev.loader_read_mb_s:.1f} MB/s from storage "
                 f"({100 * min(share, 1.0):.0f}% of the device's reads)"]


def _disk_lines(ev: Evidence, t) -> tuple[bool, list[str]]:
    if ev.disk_device is None or ev.disk_util_percent is None:
        why = ev.disk_note or "no block device found under the data folder"
        return False, [f"disk: not measurable ({why})"]
    near_ceiling = bool(ev.disk_ceiling_mb_s) and ev.disk_read_mb_s >= \
        t["disk_ceiling_fraction"] * ev.disk_ceiling_mb_s
    busy = ev.disk_util_percent >= t["disk_util"] or near_ceiling
    ceiling = f", ceiling {ev.disk_ceiling_mb_s:.0f} MB/s" if ev.disk_ceiling_mb_s else ""
    own, own_lines = _loader_did_the_reads(ev, t)
    if busy and not own:
        own_lines = [own_lines[0] + ": the disk is busy, but not with the loader's reads"]
    return busy and own, [
        f"disk {ev.disk_device}: {ev.disk_read_mb_s:.1f} MB/s read, busy "
        f"{ev.disk_util_percent:.0f}% of the time (threshold {t['disk_util']:.0f}%"
        f"{ceiling})", *own_lines]


def classify(ev: Evidence, thresholds: dict | None = None) -> Diagnosis:
    """Name the bottleneck from measured evidence; see the module docstring for the rules."""
    t = {**THRESHOLDS, **(thresholds or {})}
    lines = [f"data wait {100 * ev.wait_fraction:.0f}% of step time (p50 {ev.wait_ms_p50:.1f}"
             f" ms, p95 {ev.wait_ms_p95:.1f} ms; compute-bound below "
             f"{100 * t['compute_wait']:.0f}%)"]
    disk_busy, disk = _disk_lines(ev, t)
    cpu_busy = ev.cpu_busy_percent >= t["cpu_busy"]
    lines += disk + [f"CPU busy {ev.cpu_busy_percent:.0f}% (max of machine mean over "
                     f"{len(ev.cpu_cores)} cores and loader tree; threshold "
                     f"{t['cpu_busy']:.0f}%); the loader's processes used "
                     f"{ev.loader_cpu_share:.0f}% of the machine"]
    if ev.transfer_mb_s is not None:
        lines.append(f"worker->main transfer about {ev.transfer_mb_s:.2f} MB/s")
    if ev.gpu_util_percent is not None:
        lines.append(f"GPU busy {ev.gpu_util_percent:.0f}%")
    if ev.wait_fraction < t["compute_wait"]:
        label = "compute"
    elif disk_busy:
        label = "disk"
    elif cpu_busy:
        label = "cpu"
    elif ev.wait_fraction < t["balanced_wait"]:
        label = "balanced"
    else:
        label = "transfer"
    return Diagnosis(label, lines, _advice(label, ev))
