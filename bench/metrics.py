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
    GPU utilisation comes from NVML when `gpu_index` (a CUDA device number, mapped to its
    NVML handle by `nvml_handle`) is given and NVML is available. An NVML error while
    sampling (MIG, vGPU, a lost device) stops GPU sampling only: CPU and RSS sampling go on
    and `gpu_note` says why the GPU numbers are missing or partial.
    """

    def __init__(self, interval: float = 0.05, gpu_index: int | None = None):
        self.interval = interval
        self.proc = psutil.Process()
        self.peak_rss = 0
        self.gpu_samples: list[float] = []
        self._gpu, self.gpu_note = nvml_handle(gpu_index, with_note=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ResourceSampler:
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
                self._sample_gpu()
            self._stop.wait(self.interval)

    def _sample_gpu(self) -> None:
        import pynvml
        try:
            self.gpu_samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(self._gpu).gpu))
        except Exception as exc:  # noqa: BLE001 - NVMLError and friends: GPU sampling only
            self._gpu = None
            self.gpu_note = (f"GPU sampling stopped after {len(self.gpu_samples)} sample(s): "
                             f"{type(exc).__name__}: {exc}")

    @property
    def gpu_util_percent(self) -> float | None:
        return float(np.mean(self.gpu_samples)) if self.gpu_samples else None


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) \
        + getattr(t, "steal", 0.0)


def tree_seconds(proc: psutil.Process | None = None) -> float:
    """CPU seconds of `proc` (this process by default) and its descendants, the live ones
    and those already waited for (their time is in their parent's children_* fields)."""
    total = 0.0
    for p in _tree(proc or psutil.Process()):
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:  # gone between the listing and the reading
            pass
    return total


class LoadMonitor:
    """Who else used the CPU during a run: the machine's busy CPU seconds less this process
    tree's (the benchmark and every process it started), as cores on average; and the
    1-minute load average, sampled in a background thread, for context.

    Other processes using more than a quarter of the cores mean the rows competed with them:
    absolute samples/s are then low and ratios between loaders measured at different moments
    are suspect (interleaved rounds and CPU-ms per sample hold better). The load average is
    no such test: it counts the benchmark's own worker processes and threads.
    """

    OTHERS_SHARE = 0.25  # of the cores, on average over the run

    def __init__(self, interval: float = 1.0, cores: int | None = None):
        self.interval = interval
        self.cores = cores or os.cpu_count() or 1
        self.samples: list[float] = []
        self.others_cores: float | None = None
        self.wall = self.own_seconds = 0.0
        self._start = (0.0, 0.0, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LoadMonitor:
        self._start = (time.monotonic(), machine_busy_seconds(), tree_seconds())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        self.wall = time.monotonic() - self._start[0]
        self.own_seconds = tree_seconds() - self._start[2]
        others = machine_busy_seconds() - self._start[1] - self.own_seconds
        self.others_cores = max(0.0, others) / self.wall if self.wall > 0 else 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.interval)

    @property
    def busy(self) -> bool:
        """True when other processes used more than OTHERS_SHARE of the cores."""
        return self.others_cores is not None and \
            self.others_cores > self.OTHERS_SHARE * self.cores

    def summary(self) -> dict:
        """{"cores", "others_cores", "load1_max", "load1_median", "busy"} for the JSON."""
        loads = {"load1_max": float(max(self.samples)) if self.samples else None,
                 "load1_median": float(np.median(self.samples)) if self.samples else None}
        return {"cores": self.cores, "others_cores": self.others_cores, **loads,
                "busy": self.busy}

    def warning(self) -> str:
        return (f"warning: the machine was busy during the run (other processes used "
                f"{self.others_cores or 0.0:.1f} of {self.cores} cores on average): samples/s "
                f"are low and the ratios are suspect; compare CPU ms/sample and re-run with "
                f"more --repeats on a quieter machine")


def nvml_handle(index: int | None, *, with_note: bool = False, nvml=None, props=None):
    """The NVML handle of CUDA device `index` (None without NVML, a GPU, or `index`).

    NVML numbers GPUs in PCI order and ignores CUDA_VISIBLE_DEVICES, so CUDA device `index`
    is looked up by its UUID, else its PCI bus id (from torch.cuda.get_device_properties),
    never by NVML index.

    Args:
        index: the CUDA device number (as torch counts, after CUDA_VISIBLE_DEVICES).
        with_note: also return a note saying why no handle was found (None when found).
        nvml: the pynvml module (default: imported); props: the torch device properties
            (default: torch.cuda.get_device_properties(index)). Both for tests.
    Returns:
        the handle or None; with `with_note`, (handle, note).
    """
    handle, note = None, None
    if index is not None:
        try:
            handle = _lookup(index, nvml, props)
        except Exception as exc:  # noqa: BLE001 - NVML missing, no driver, no such device
            note = f"no NVML handle for CUDA device {index}: {type(exc).__name__}: {exc}"
    return (handle, note) if with_note else handle


def _lookup(index: int, nvml, props):
    if nvml is None:
        import pynvml as nvml
    if props is None:
        import torch
        props = torch.cuda.get_device_properties(index)
    nvml.nvmlInit()
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        try:
            return nvml.nvmlDeviceGetHandleByUUID(text if text.startswith(("GPU-", "MIG-"))
                                                  else f"GPU-{text}")
        except Exception:  # noqa: BLE001 - a MIG slice or an old driver: try the bus id
            pass
    return nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id(props))


def pci_bus_id(props) -> str:
    """NVML's "DDDDDDDD:BB:DD.0" bus id from torch device properties."""
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def gpu_index(device: str) -> int | None:
    """The CUDA device number `device` ("cpu", "cuda", "cuda:N", "auto") runs on, as the
    loaders resolve it (a plain "cuda" is this process's GPU); None for the CPU."""
    if not str(device).startswith("cuda"):
        return None
    from torch_bridge.loader import resolve_device
    return resolve_device(device).index


def gpu_name(device: str) -> str | None:
    """The name of the GPU `device` runs on (None for the CPU)."""
    index = gpu_index(device)
    if index is None:
        return None
    import torch
    return torch.cuda.get_device_name(index)


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
