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
        self._gpu = nvml_handle(gpu_index)
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
        self.cpu_seconds = used
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


class LoadMonitor:
    """Samples the machine's 1-minute load average in a background thread.

    A load above the number of cores means other processes competed for the CPU during
    the run: absolute samples/s are then low and ratios between loaders measured at
    different moments are suspect (interleaved rounds and CPU-ms per sample hold better).
    """

    def __init__(self, interval: float = 1.0, cores: int | None = None):
        self.interval = interval
        self.cores = cores or os.cpu_count() or 1
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "LoadMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.interval)

    @property
    def busy(self) -> bool:
        """True when the 1-minute load went above the number of cores."""
        return bool(self.samples) and max(self.samples) > self.cores

    def summary(self) -> dict:
        """{"cores", "load1_max", "load1_median", "busy"} for the JSON report."""
        if not self.samples:
            return {"cores": self.cores, "load1_max": None, "load1_median": None,
                    "busy": False}
        return {"cores": self.cores, "load1_max": float(max(self.samples)),
                "load1_median": float(np.median(self.samples)), "busy": self.busy}

    def warning(self) -> str:
        s = self.summary()
        return (f"warning: the machine was busy during the run (1-minute load up to "
                f"{s['load1_max']:.1f} on {self.cores} cores): other processes took CPU "
                f"time, so samples/s are low and the ratios are suspect; compare CPU ms/sample "
                f"and re-run with more --repeats on a quieter machine")


def nvml_handle(index: int | None):
    if index is None:
        return None
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # NVML missing or no driver: report no GPU numbers, not a crash
        return None


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
