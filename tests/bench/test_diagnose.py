"""diagnose.py: classify() on hand-made evidence, the disk probes, and end-to-end runs on
small data labelled compute-, CPU- and disk-bound.

The disk-bound run needs reads that really reach the device. Without root the page cache
cannot be dropped, but a process may evict its own files' pages (POSIX_FADV_DONTNEED).
Its data is one ENVI cube of patches laid 8 MiB apart: each cold patch read through the
memory map costs a read of the device's read-ahead window (8 MiB where it is set that
high) for a few KiB of use, and four DataLoader workers keep the device queue full while
each sample costs little CPU. The test skips, saying why, where reads cannot reach a
block device, or where other processes keep the cores so busy that the loader starves
for CPU rather than for disk.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from bench.diagnosis import THRESHOLDS, Evidence, classify
from bench.diagnosis.probes import DiskSampler, block_device_for, mount_of
from tests.conftest import write_image_folder

ROOT = Path(__file__).resolve().parents[2]


def _evidence(**changes) -> Evidence:
    base = dict(wait_fraction=0.6, wait_ms_p50=40.0, wait_ms_p95=55.0, compute_ms_p50=20.0,
                cpu_cores=[30.0, 25.0], process_cpu_percent=50.0, disk_device="nvme0n1",
                disk_read_mb_s=20.0, disk_util_percent=10.0)
    return Evidence(**{**base, **changes})


def test_classify_disk_bound_by_utilisation():
    dx = classify(_evidence(disk_util_percent=97.0, disk_read_mb_s=180.0))
    assert dx.bottleneck == "disk"
    assert any("97%" in line for line in dx.evidence)
    assert "cache" in dx.next_step


def test_classify_disk_bound_near_measured_ceiling():
    ev = _evidence(disk_util_percent=40.0, disk_read_mb_s=450.0, disk_ceiling_mb_s=500.0)
    assert classify(ev).bottleneck == "disk"


def test_classify_cpu_bound():
    dx = classify(_evidence(cpu_cores=[97.0, 99.0], process_cpu_percent=190.0))
    assert dx.bottleneck == "cpu"
    assert "GPU" in dx.next_step  # DALI on CPU: decode on the GPU next


def test_classify_cpu_bound_from_the_loader_tree_alone():
    ev = _evidence(cpu_cores=[60.0, 70.0], process_cpu_percent=180.0, backend="torch")
    dx = classify(ev)
    assert dx.bottleneck == "cpu" and "DALI" in dx.next_step


def test_classify_cpu_busy_with_other_processes_says_so():
    dx = classify(_evidence(cpu_cores=[98.0, 96.0], process_cpu_percent=40.0))
    assert dx.bottleneck == "cpu" and "Other processes" in dx.next_step
    assert any("loader's processes used 20% of the machine" in line for line in dx.evidence)


def test_classify_compute_bound_even_with_busy_resources():
    ev = _evidence(wait_fraction=0.03, cpu_cores=[100.0, 100.0], disk_util_percent=95.0)
    dx = classify(ev)
    assert dx.bottleneck == "compute"
    assert "3%" in dx.evidence[0]


def test_classify_transfer_and_balanced():
    assert classify(_evidence(backend="torch")).bottleneck == "transfer"
    assert "num_workers" in classify(_evidence(backend="torch")).next_step
    assert classify(_evidence(wait_fraction=0.15)).bottleneck == "balanced"


def test_classify_without_a_disk_device_says_so():
    dx = classify(_evidence(disk_device=None, disk_util_percent=None, disk_read_mb_s=None,
                            disk_note="the data is on a tmpfs file system at /dev/shm"))
    assert dx.bottleneck == "transfer"
    assert any(line.startswith("disk: not measurable (the data is on a tmpfs")
               for line in dx.evidence)


def test_busy_disk_is_not_the_bottleneck_when_the_loader_does_not_read_from_it():
    busy = dict(disk_util_percent=97.0, disk_read_mb_s=180.0)
    assert classify(_evidence(**busy, loader_read_mb_s=150.0)).bottleneck == "disk"
    dx = classify(_evidence(**busy, loader_read_mb_s=0.0))
    assert dx.bottleneck == "transfer"
    assert any("not with the loader's reads" in line for line in dx.evidence)


def test_thresholds_can_be_overridden():
    ev = _evidence(wait_fraction=0.15)
    assert classify(ev, {"compute_wait": 0.2}).bottleneck == "compute"
    assert THRESHOLDS["compute_wait"] == 0.10


def test_mount_of_picks_the_longest_mount_point(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("22 1 0:21 / / rw - overlay overlay rw,lowerdir=/a\n"
                    "25 22 0:23 / /mnt/ram rw - tmpfs tmpfs rw\n"
                    "26 22 0:24 / /data\\040set rw - nfs4 host:/x rw\n")
    assert mount_of("/mnt/ram/a/b", str(info)) == ("/mnt/ram", "tmpfs")
    assert mount_of("/mnt/ramx", str(info)) == ("/", "overlay")
    assert mount_of("/data set/train", str(info)) == ("/data set", "nfs4")


def _tmpfs_folder():
    shm = Path("/dev/shm")
    if not shm.is_dir() or (mount_of(shm) or ("", ""))[1] != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm to put data on")
    return Path(tempfile.mkdtemp(dir=shm))


def test_disk_sampler_on_tmpfs_is_not_measurable_rather_than_idle():
    folder = _tmpfs_folder()
    try:
        with DiskSampler(folder) as disk:
            (folder / "x.bin").write_bytes(bytes(1 << 20))
            (folder / "x.bin").read_bytes()
    finally:
        shutil.rmtree(folder)
    assert disk.device is None and disk.read_mb_s is None and disk.util_percent is None
    assert "tmpfs" in disk.note and "no block device" in disk.note


def _diagnose(data: Path, tmp_path: Path, *extra, capsys, backend: str = "dali") -> dict:
    """diagnose.py's main() in this process (which has imported torch already; the loader,
    its workers and the probes are those of a run of the script, which
    test_bad_data_folder_is_reported starts as a process of its own): its report."""
    from bench.diagnose import main
    out = tmp_path / "dx.json"
    code = main(["--data", str(data), "--device", "cpu", "--backend", backend, "--batch-size",
                 "8", "--json", str(out), *extra])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-2000:]
    assert "bottleneck:" in stdout and "next:" in stdout
    return {**json.loads(out.read_text()), "stdout": stdout}


def test_end_to_end_compute_bound(tmp_path, capsys):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    report = _diagnose(data, tmp_path, "--size", "32", "--compute-ms", "200",
                       "--steps", "6", "--warmup", "2", capsys=capsys)
    assert report["diagnosis"]["bottleneck"] == "compute", report["diagnosis"]
    ev = report["evidence"]
    assert ev["wait_fraction"] < 0.10 and ev["compute_ms_p50"] >= 190
    assert len(report["steps"]["wait_ms"]) == 6 and len(ev["cpu_cores"]) >= 1


def test_end_to_end_data_on_tmpfs_reports_the_disk_not_measurable(tmp_path, capsys):
    data = write_image_folder(_tmpfs_folder() / "d", n_images=8, n_classes=2)
    try:
        report = _diagnose(data, tmp_path, "--size", "32", "--compute-ms", "0",
                           "--steps", "2", "--warmup", "1", "--batch-size", "4",
                           capsys=capsys)
    finally:
        shutil.rmtree(data.parent)
    ev = report["evidence"]
    assert ev["disk_device"] is None and ev["disk_util_percent"] is None
    assert ev["disk_read_mb_s"] is None and "tmpfs" in ev["disk_note"]
    assert any(line.startswith("disk: not measurable (the data is on a tmpfs")
               for line in report["diagnosis"]["evidence"])
    assert report["stdout"].count("not measurable") >= 2  # the table row and the evidence


def test_end_to_end_cpu_bound(tmp_path, capsys):
    """Compute 0, full-size JPEGs decoded and resized on the CPU: every core decodes."""
    data = write_image_folder(tmp_path / "d", n_images=32, n_classes=2, sizes=((375, 500),))
    # Batches of 32 keep the loader's own Python work per image small, as in training.
    report = _diagnose(data, tmp_path, "--compute-ms", "0", "--steps", "30", "--warmup", "2",
                       "--batch-size", "32", capsys=capsys)
    assert report["diagnosis"]["bottleneck"] == "cpu", report["diagnosis"]
    assert report["evidence"]["wait_fraction"] > 0.9


BLOCK = 8 << 20  # bytes between two samples' patches in the cold cube
ROW = 512 * 256 * 2  # BIP rows: 512 samples of 256 int16 bands


def _write_cold_cube(root: Path, n_samples: int) -> Path:
    """One BIP cube with a labelled pixel every BLOCK bytes, fsynced so it can be evicted."""
    root.mkdir()
    lines = n_samples * BLOCK // ROW
    (root / "cold.hdr").write_text(
        f"ENVI\nsamples = 512\nlines = {lines}\nbands = 256\nheader offset = 0\n"
        "file type = ENVI Standard\ndata type = 2\ninterleave = bip\nbyte order = 0\n")
    block = np.random.default_rng(0).integers(0, 4000, BLOCK // 2, dtype=np.int16).tobytes()
    with open(root / "cold.img", "wb") as f:
        for _ in range(n_samples):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    labels = np.zeros((lines, 512), np.uint8)
    labels[BLOCK // ROW // 2::BLOCK // ROW, 256] = 1 + np.arange(n_samples) % 2
    np.save(root / "cold.labels.npy", labels)
    return root


def _evict(root: Path) -> None:
    for path in root.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _storage_read_bytes() -> int:
    with open("/proc/self/io") as f:
        fields = dict(line.split(": ") for line in f.read().splitlines())
    return int(fields["read_bytes"])


def _check_eviction_reaches_the_device(data: Path) -> None:
    _evict(data)
    before = _storage_read_bytes()
    cube = np.memmap(data / "cold.img", dtype=np.int16, mode="r")
    int(cube[BLOCK // 2 // 2])  # one element in the middle of the first block
    del cube
    if _storage_read_bytes() - before < 4096:
        pytest.skip("after POSIX_FADV_DONTNEED a cold read fetched nothing from storage "
                    "(/proc/self/io read_bytes unchanged): no run can be disk-bound here")


def _cold_run(data: Path, tmp_path: Path, capsys) -> dict:
    _evict(data)
    # 1 warm-up + 14 timed batches of 2, plus 8 prefetched (4 workers): 46 of the 48
    # samples, each read once, so no read is served from the page cache. Four workers
    # keep reads in flight while others wait for a core (torch warns about more workers than
    # cores on a smaller machine: the point here, not a finding)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"This DataLoader will create \d+ worker")
        return _diagnose(data, tmp_path, "--modality", "hyperspectral", "--workers", "4",
                         "--batch-size", "2", "--compute-ms", "0", "--steps", "14",
                         "--warmup", "1", backend="torch", capsys=capsys)


def test_end_to_end_cold_reads_reach_the_evidence(tmp_path, capsys):
    """Cold patches read by DataLoader workers: the evidence names the block device the data
    lives on and counts the loader's own reads from it, whatever else the machine runs. Which
    bottleneck those numbers make is `classify`'s rule, tested above on fixed evidence
    (test_classify_disk_bound_*, test_classify_cpu_busy_with_other_processes_says_so)."""
    device = block_device_for(tmp_path)
    if device is None:
        fs = mount_of(tmp_path)
        pytest.skip(f"{tmp_path} is on {fs[1] if fs else 'a file system'} without a block "
                    "device: reads never reach a disk")
    data = _write_cold_cube(tmp_path / "cold", n_samples=48)
    try:
        _check_eviction_reaches_the_device(data)
        report = _cold_run(data, tmp_path, capsys)
    finally:
        shutil.rmtree(data)
    ev, dx = report["evidence"], report["diagnosis"]
    assert ev["disk_device"] == device
    # 46 cold patches, 8 MiB apart: every one is a read from the device, counted
    assert ev["loader_read_mb_s"] > 0 and ev["disk_read_mb_s"] > 0
    assert ev["disk_util_percent"] > 0
    assert dx["bottleneck"] in {"disk", "cpu", "balanced", "transfer", "compute"}
    assert dx["evidence"] and dx["next_step"]


def test_bad_data_folder_is_reported(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "diagnose.py"), "--data",
         str(tmp_path / "missing"), "--device", "cpu", "--steps", "1"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "does not exist" in proc.stderr


@pytest.mark.parametrize("model", ["tiny-cnn"])
def test_model_step_runs_on_torch_backend(tmp_path, model, capsys):
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    ev = _diagnose(data, tmp_path, "--workers", "1", "--model", model, "--size", "32",
                   "--steps", "3", "--warmup", "1", backend="torch", capsys=capsys)["evidence"]
    assert ev["transfer_mb_s"] > 0 and ev["compute_ms_p50"] > 0
