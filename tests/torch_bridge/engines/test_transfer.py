"""torch_bridge.engines._transfer: every host field of a batch reaches a device through one staging
buffer and one non-blocking copy (checked with an injected allocator / transfer, since this
machine may have no CUDA), pinned DALI CPU outputs convert, constants are cached."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from nvidia.dali.backend import TensorListCPU

from torch_bridge.engines import _transfer as transfer
from torch_bridge.protocols import DaliFeed


class Recorder:
    """Stands in for pinned allocation and the host-to-device copy."""

    def __init__(self):
        self.buffers, self.copies = [], []

    def allocate(self, nbytes):
        buf = torch.empty(nbytes, dtype=torch.uint8)
        self.buffers.append(buf)
        return buf

    def transfer(self, buf):
        self.copies.append(buf)
        return buf.clone()  # "device" memory: a different buffer with the same bytes


def fields():
    return {"label": torch.tensor([3, 1, 2]), "timestamps": torch.rand(3, 5, dtype=torch.float64),
            "mask": torch.tensor([[True, False], [True, True], [False, False]]),
            "imu": torch.rand(3, 5, 6), "empty": torch.zeros(0, dtype=torch.int32)}


def test_every_host_field_goes_through_one_staging_buffer():
    rec, src = Recorder(), fields()
    out = transfer.stage(src, torch.device("cuda", 0), allocate=rec.allocate,
                         transfer=rec.transfer)
    assert len(rec.buffers) == 1 and len(rec.copies) == 1
    assert rec.copies[0] is rec.buffers[0]  # the copy reads the staging buffer, nothing else
    for name, t in src.items():
        assert out[name].dtype == t.dtype and out[name].shape == t.shape
        assert torch.equal(out[name], t)
        assert out[name].untyped_storage().data_ptr() != rec.buffers[0].data_ptr() or \
            t.numel() == 0


def test_layout_is_aligned_and_disjoint():
    offsets, total = transfer.layout(fields())
    assert all(o % transfer.ALIGN == 0 for o in offsets.values())
    assert total >= max(offsets.values()) and total % transfer.ALIGN == 0


def test_cpu_target_is_untouched():
    src = fields()
    out = transfer.stage(src, torch.device("cpu"), allocate=None, transfer=None)
    assert all(out[k] is src[k] for k in src)


def test_attach_meta_stages_meta_and_host_outputs(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(transfer, "pinned_buffer", rec.allocate)

    class Mod(DaliFeed):
        def meta(self, indices):
            return {"label": indices % 2, "index": indices}

    staged = {}
    real = transfer.stage

    def spy(host, device, **kw):
        staged.update(host)
        return real(host, device, allocate=rec.allocate, transfer=rec.transfer)
    monkeypatch.setattr(transfer, "stage", spy)
    batch = {"timestamps": torch.rand(2, 4, dtype=torch.float64)}
    out = transfer.attach_meta(batch, Mod(), np.array([4, 7]), torch.device("cuda", 0))
    assert set(staged) == {"timestamps", "label", "index"} and len(rec.copies) == 1
    assert out["index"].tolist() == [4, 7] and out["label"].tolist() == [0, 1]


def test_pageable_dali_output_is_zero_copy():
    tl = TensorListCPU(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = transfer.dali_to_torch(tl, torch.device("cpu"))
    assert t.shape == (3, 4) and t.dtype == torch.float32 and t[2, 3] == 11


def test_pinned_dali_output_converts():
    class Pinned:  # what a pinned TensorCPU reports (kDLCUDAHost), backed by host memory
        def __init__(self, a):
            self.a = a

        def __dlpack_device__(self):
            return (3, 0)

        def __array__(self, dtype=None, copy=None):
            return self.a
    t = transfer.host_tensor(Pinned(np.arange(6, dtype=np.int64).reshape(2, 3)))
    assert t.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_constants_are_copied_once_per_device():
    value = torch.arange(3.0)
    a = transfer.on_device("test_const", value, torch.device("cpu"))
    assert transfer.on_device("test_const", value + 1, torch.device("cpu")) is a


@pytest.mark.gpu
def test_staging_buffer_is_pinned_and_values_arrive():
    src = fields()
    seen = []

    def allocate(n):
        buf = transfer.pinned_buffer(n)
        seen.append(buf.is_pinned())
        return buf
    out = transfer.stage(src, torch.device("cuda"), allocate=allocate)
    torch.cuda.current_stream().synchronize()
    assert seen == [True]
    assert all(torch.equal(out[k].cpu(), v) and out[k].is_cuda for k, v in src.items())
