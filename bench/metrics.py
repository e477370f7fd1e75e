"""Resource measurement for benchmark runs: CPU, peak RSS and GPU use of a process tree."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import psutil


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds per process: this process to the nanosecond (time.process_time), its
    children from psutil (clock ticks)."""
    out = {}
    for p in procs:
        if p.pid == os.getpid():
            out[p.pid] = time.process_time()
            continue
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


class ResourceSampler:
    """Samples this process and its children (DataLoader workers) in a background thread.

    CPU percent is CPU seconds over wall seconds times 100, so 200% means two busy cores.
    Peak RSS sums resident memory over the tree (shared pages are counted per process).
    GPU utilisation comes from NVML when `gpu_index` is given and NVML is available.
    """

    def __init__(self, interval: float = 0.05, gpu_index: int | None = None):
        self.interval = interval
        self.proc = psutil.Process()
        self.peak_rss = 0
        self.gpu_samples: list[float] = []
        self._gpu = _nvml_handle(gpu_index)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "ResourceSampler":
        self._cpu0 = _cpu_seconds(_tree(self.proc))
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.wall = time.perf_counter() - self._t0
        cpu1 = _cpu_seconds(_tree(self.proc))
        used = sum(v - self._cpu0.get(pid, 0.0) for pid, v in cpu1.items())
        self.cpu_percent = 100.0 * used / self.wall if self.wall > 0 else 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            for p in _tree(self.proc):
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_rss = max(self.peak_rss, rss)
            if self._gpu is not None:
                import pynvml
                self.gpu_samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(self._gpu).gpu))
            self._stop.wait(self.interval)

    @property
    def gpu_util_percent(self) -> float | None:
        return float(np.mean(self.gpu_samples)) if self.gpu_samples else None


def _nvml_handle(index: int | None):
    if index is None:
        return None
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # NVML missing or no driver: report no GPU numbers, not a crash
        return None


# --- Diagnosis probes (bench/diagnose.py): per-core CPU, disk counters, NVML engines ------

def per_core_busy(before, after) -> list[float]:
    """Busy percent of each core between two `psutil.cpu_times(percpu=True)` snapshots.

    Busy is everything but idle and iowait: a core waiting for the disk is not computing.
    """
    out = []
    for t0, t1 in zip(before, after):
        total = sum(t1) - sum(t0)
        idle = (t1.idle - t0.idle) + (getattr(t1, "iowait", 0.0) - getattr(t0, "iowait", 0.0))
        out.append(100.0 * (total - idle) / total if total > 0 else 0.0)
    return out


def block_device_for(path) -> str | None:
    """The whole-disk block device (e.g. "nvme0n1", "sda") holding `path`, or None when the
    file system has no block device of its own (tmpfs, overlay, network file systems)."""
    dev = os.stat(path).st_dev
    link = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    if os.major(dev) == 0 or not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)  # a partition: its counters are in the parent disk too
    return os.path.basename(real)


def read_diskstats(device: str, path: str = "/proc/diskstats") -> tuple[int, int] | None:
    """(bytes read, milliseconds busy) since boot for `device`, or None if it is not listed.

    /proc/diskstats fields after the name: reads, merged, sectors read (512 B each), ms
    reading, writes, merged, sectors written, ms writing, in flight, ms doing I/O, ...
    """
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 13 and parts[2] == device:
                    return int(parts[5]) * 512, int(parts[12])
    except OSError:
        return None
    return None


class DiskSampler:
    """Read throughput (MB/s) and utilisation (% of wall time with I/O in flight, as
    iostat's %util) of the disk under a folder, over a `with` block.

    `device` is None and both numbers are None when no block device backs the folder.
    """

    def __init__(self, folder):
        self.device = block_device_for(folder)
        self.read_mb_s: float | None = None
        self.util_percent: float | None = None
        self.read_bytes = 0

    def __enter__(self) -> "DiskSampler":
        self._t0 = time.perf_counter()
        self._c0 = read_diskstats(self.device) if self.device else None
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        c1 = read_diskstats(self.device) if self._c0 else None
        if c1 is None or wall <= 0:
            return
        self.read_bytes = c1[0] - self._c0[0]
        self.read_mb_s = self.read_bytes / 2**20 / wall
        self.util_percent = min(100.0, 100.0 * (c1[1] - self._c0[1]) / 1e3 / wall)


class EngineSampler:
    """Mean NVML utilisation of the GPU's video decoder (NVDEC) and JPEG engine (NVJPG)
    over a `with` block, sampled in a thread. Values stay None without NVML, a GPU, or
    (for the JPEG engine) a GPU or driver that has one."""

    def __init__(self, gpu_index: int | None, interval: float = 0.1):
        self._handle = _nvml_handle(gpu_index)
        self.interval = interval
        self.samples: dict[str, list[float]] = {"decoder": [], "jpeg": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "EngineSampler":
        if self._handle is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        import pynvml
        probes = {"decoder": pynvml.nvmlDeviceGetDecoderUtilization,
                  "jpeg": getattr(pynvml, "nvmlDeviceGetJpgUtilization", None)}
        while not self._stop.is_set():
            for name, probe in list(probes.items()):
                try:
                    self.samples[name].append(float(probe(self._handle)[0]))
                except Exception:  # not supported on this GPU/driver: stop asking
                    probes.pop(name)
            self._stop.wait(self.interval)

    def mean(self, name: str) -> float | None:
        values = self.samples[name]
        return float(np.mean(values)) if values else None


def tensor_bytes(batch: dict) -> int:
    """Bytes held by the tensors of one batch dict (what crossed into the main process)."""
    return int(sum(v.numel() * v.element_size() for v in batch.values()
                   if hasattr(v, "element_size")))


def worker_transfer_bytes(batch: dict) -> int:
    """Estimated bytes DataLoader workers pickle to the main process for one batch of the
    torch backend: reference.py ships uint8 pixels and normalizes in the consumer, so
    float pixel fields ("image", "frames") count one byte per element."""
    pixels = {k: v for k, v in batch.items() if k in ("image", "frames")}
    rest = {k: v for k, v in batch.items() if k not in pixels}
    return tensor_bytes(rest) + int(sum(v.numel() for v in pixels.values()))
