"""Kernel and driver counters read around the timed steps: CPU per core (/proc/stat through
psutil), the disk under the data (/proc/diskstats), what the loader's processes read from
storage (/proc/<pid>/io), and the GPU's video-decoder and JPEG engines (NVML)."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import psutil

from bench.metrics import nvml_handle


def per_core_busy(before, after) -> list[float]:
    """Busy percent of each core between two `psutil.cpu_times(percpu=True)` snapshots.

    Busy is everything but idle and iowait: a core waiting for the disk is not computing.
    """
    out = []
    for t0, t1 in zip(before, after, strict=True):
        total = sum(t1) - sum(t0)
        idle = (t1.idle - t0.idle) + (getattr(t1, "iowait", 0.0) - getattr(t0, "iowait", 0.0))
        out.append(100.0 * (total - idle) / total if total > 0 else 0.0)
    return out


def mount_of(path, mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str] | None:
    """(mount point, file system type) of the mount holding `path`, or None if unknown."""
    real, best = os.path.realpath(path), None
    try:
        with open(mountinfo) as f:
            for line in f:
                left, _, right = line.partition(" - ")
                point = left.split()[4].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and (best is None or len(point) >= len(best[0])):
                    best = (point, right.split()[0])
    except (OSError, IndexError):
        return None
    return best


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


def tree_read_bytes(proc: psutil.Process) -> dict[int, int]:
    """Bytes each process of `proc`'s tree has had fetched from storage (/proc/<pid>/io
    read_bytes: page-cache hits are not counted; all threads of a process are)."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        procs = [proc]
    out = {}
    for p in procs:
        try:
            out[p.pid] = p.io_counters().read_bytes
        except (psutil.Error, AttributeError):  # gone, or no io counters on this system
            pass
    return out


def _unmeasurable_disk(folder) -> str:
    mount = mount_of(folder)
    where = f"a {mount[1]} file system at {mount[0]}" if mount else "a file system"
    return f"the data is on {where}, which has no block device of its own"


class DiskSampler:
    """Over a `with` block: read throughput (MB/s) and utilisation (% of wall time with I/O
    in flight, as iostat's %util) of the disk under a folder, and how many MB/s the
    loader's process tree read from storage.

    The loader's bytes count when its reads are issued, the device's when they complete,
    so over a short block the loader can seem to have read a little more than the device.
    With no block device under the folder (tmpfs, overlay, network file systems) `device`,
    `read_mb_s` and `util_percent` stay None and `note` says why: not measurable, not idle.
    """

    def __init__(self, folder, proc: psutil.Process | None = None):
        self.device = block_device_for(folder)
        self.note = None if self.device else _unmeasurable_disk(folder)
        self.proc = proc or psutil.Process()
        self.read_mb_s: float | None = None
        self.util_percent: float | None = None
        self.loader_read_mb_s: float | None = None

    def __enter__(self) -> DiskSampler:
        self._t0 = time.perf_counter()
        self._c0 = read_diskstats(self.device) if self.device else None
        if self.device and self._c0 is None:
            self.note = f"{self.device} is not listed in /proc/diskstats"
        self._own0 = tree_read_bytes(self.proc)
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        own = tree_read_bytes(self.proc)
        c1 = read_diskstats(self.device) if self._c0 else None
        if wall <= 0:
            return
        if own:
            moved = sum(v - self._own0.get(pid, 0) for pid, v in own.items())
            self.loader_read_mb_s = moved / 2**20 / wall
        if c1 is not None:
            self.read_mb_s = (c1[0] - self._c0[0]) / 2**20 / wall
            self.util_percent = min(100.0, 100.0 * (c1[1] - self._c0[1]) / 1e3 / wall)


class EngineSampler:
    """Mean NVML utilisation of the GPU's video decoder (NVDEC) and JPEG engine (NVJPG)
    over a `with` block, sampled in a thread. Values stay None without NVML, a GPU, or
    (for the JPEG engine) a GPU or driver that has one."""

    def __init__(self, gpu_index: int | None, interval: float = 0.1):
        self._handle = nvml_handle(gpu_index)
        self.interval = interval
        self.samples: dict[str, list[float]] = {"decoder": [], "jpeg": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EngineSampler:
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
