"""bench.metrics NVML part with a fake NVML (a test double for the hardware library):
handles by UUID / PCI bus id of the CUDA device, errors stop GPU sampling only."""
from __future__ import annotations

import time
import types

from bench import metrics


class NVMLError(Exception):
    pass


class FakeNVML:
    """Two GPUs in PCI order; CUDA sees only the second (CUDA_VISIBLE_DEVICES=1)."""

    def __init__(self, *, uuid_works=True, fail_after=None):
        self.uuid_works, self.fail_after, self.calls = uuid_works, fail_after, 0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        raise AssertionError("NVML index used: it ignores CUDA_VISIBLE_DEVICES")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if not self.uuid_works:
            raise NVMLError("Not Supported")
        return {"GPU-2222": "nvml-1"}[uuid]

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return {"00000000:65:00.0": "nvml-1", "00000000:17:00.0": "nvml-0"}[bus]

    def nvmlDeviceGetUtilizationRates(self, handle):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise NVMLError("GPU is lost")
        return types.SimpleNamespace(gpu=42)


PROPS = types.SimpleNamespace(uuid="2222", pci_domain_id=0, pci_bus_id=0x65, pci_device_id=0)


def test_handle_by_uuid_then_by_bus_id():
    assert metrics.nvml_handle(0, nvml=FakeNVML(), props=PROPS) == "nvml-1"
    assert metrics.nvml_handle(0, nvml=FakeNVML(uuid_works=False), props=PROPS) == "nvml-1"
    no_uuid = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x17, pci_device_id=0)
    assert metrics.nvml_handle(0, nvml=FakeNVML(), props=no_uuid) == "nvml-0"
    assert metrics.pci_bus_id(PROPS) == "00000000:65:00.0"


def test_lookup_failure_is_a_note_not_a_crash():
    bad = types.SimpleNamespace(uuid=None, pci_domain_id=0, pci_bus_id=0x99, pci_device_id=0)
    handle, note = metrics.nvml_handle(0, with_note=True, nvml=FakeNVML(), props=bad)
    assert handle is None and "CUDA device 0" in note
    assert metrics.nvml_handle(None, with_note=True) == (None, None)


def test_an_nvml_error_stops_gpu_sampling_only(monkeypatch):
    fake = FakeNVML(fail_after=2)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    monkeypatch.setattr(metrics, "nvml_handle", lambda index, with_note=False: ("nvml-1", None))
    with metrics.ResourceSampler(interval=0.01, gpu_index=0) as res:
        deadline = time.monotonic() + 30  # a bound, not a timing assertion
        while fake.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert res.gpu_samples == [42.0, 42.0] and res.gpu_util_percent == 42.0
    assert "GPU sampling stopped after 2" in res.gpu_note and "GPU is lost" in res.gpu_note
    assert res.peak_rss > 0 and res.cpu_percent >= 0  # the thread lived on


def test_cpu_device_has_no_gpu_index_or_name():
    assert metrics.gpu_index("cpu") is None and metrics.gpu_name("cpu") is None
