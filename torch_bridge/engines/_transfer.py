"""Moving a batch (DALI outputs and the fields that bypass DALI) onto the target device
without stalling the consumer.

A pageable host tensor's `.to("cuda")` is synchronous with respect to the host, so each of
the 2-10 small fields of a batch (labels, indices, timestamps, masks, IMU values: DALI CPU
outputs of a GPU graph and the modality's `meta`) would make `next(loader)` wait for the
training work already queued on the stream. Instead every host field of a batch is packed
once into ONE pinned staging buffer (`stage`) that crosses with a single
`non_blocking=True` copy on torch's current stream; the device fields are views into the
copied buffer. torch's pinned-memory allocator keeps the buffer alive until that copy has
run. GPU outputs are handed over without a copy (`torch.from_dlpack` on DALI's output, which
the engine takes with `outputs(cuda_stream=torch's current stream)`).
Normalisation constants live once per device (`on_device`).

DALI CPU outputs held in pinned memory (a DLPack device of kDLCUDAHost, which
`torch.from_dlpack` rejects) are read through the buffer protocol instead.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from nvidia.dali.backend import TensorListCPU, TensorListGPU

ALIGN = 64  # bytes between fields in the staging buffer (any dtype's view is aligned)
_KDL_CUDA_HOST = 3  # DLPack's kDLCUDAHost: pinned host memory
_CONSTANTS: dict[tuple[str, str], torch.Tensor] = {}


def dali_to_torch(tensor_list, device: torch.device, zero_copy: bool = True) -> torch.Tensor:
    """A dense (B, ...) torch tensor from a uniform TensorList: a GPU one handed over
    without a copy (DLPack; `zero_copy=False`: copied into memory torch owns on `device`);
    a CPU one as a host tensor (zero copy where DALI allows it), which `attach_meta` then
    stages to `device` together with the batch's other host fields.

    Args:
        tensor_list: a DALI TensorListGPU or TensorListCPU of uniform shape.
        device: the loader's device.
        zero_copy: hand GPU outputs over through DLPack (pipelines on DALI's dynamic
            executor, which every graph of dali_pipes uses).
    Returns:
        the tensor (on `device` for GPU outputs, on the host for CPU outputs).
    """
    from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type

    if isinstance(tensor_list, TensorListGPU):
        dense = tensor_list.as_tensor()
        if zero_copy:  # DALI's dynamic executor never reuses a buffer torch still holds
            with torch.cuda.device(device):
                return torch.from_dlpack(dense)  # ordered on torch's current stream
        out = torch.empty(dense.shape(), dtype=to_torch_type[dense.dtype], device=device)
        feed_ndarray(dense, out, cuda_stream=torch.cuda.current_stream(device))
        return out
    if not isinstance(tensor_list, TensorListCPU):
        raise TypeError(f"expected a DALI TensorList, got {type(tensor_list).__name__}")
    return host_tensor(tensor_list.as_tensor())


def host_tensor(dense) -> torch.Tensor:
    """A torch view of a dense DALI CPU tensor. Pageable memory: zero copy through DLPack
    (DALI's dynamic executor never reuses a buffer a capsule still references). Pinned
    memory (kDLCUDAHost, refused by torch.from_dlpack): a copy through the buffer protocol.
    """
    if int(dense.__dlpack_device__()[0]) == _KDL_CUDA_HOST:
        return torch.from_numpy(np.array(dense))
    return torch.from_dlpack(dense)


def attach_meta(batch: dict, modality, kept: np.ndarray | Sequence[int],
                device: torch.device) -> dict:
    """Add the fields that bypass decoding (labels, indices, source ids) to a batch and move
    every host field of it to `device` in one staged copy (`stage`).

    Args:
        batch: field -> tensor (device tensors, and host tensors still to move).
        modality: a `DaliFeed` (`regroup`, `meta`).
        kept: the batch's dataset indices.
        device: the loader's device.
    Returns:
        `batch`, every field on `device`.
    """
    batch = modality.regroup(batch, len(kept))  # per-frame outputs -> clips (frame folders)
    host = {name: t for name, t in batch.items() if t.device.type == "cpu"}
    kept = np.asarray(kept, dtype=np.int64)
    for name, values in modality.meta(kept).items():
        host[name] = torch.from_numpy(np.ascontiguousarray(values))
    batch.update(stage(host, device))
    if "index" in batch:
        # the "index" tensor carries its host copy, for the steps after the batch (erasing
        # keys its boxes by it) without reading the staged copy back from the device
        batch["index"].host_copy = kept
    return batch


def layout(fields: dict[str, torch.Tensor]) -> tuple[dict[str, int], int]:
    """Byte offset of each field in a staging buffer (ALIGN-aligned) and the buffer size."""
    offsets, total = {}, 0
    for name, t in fields.items():
        offsets[name] = total
        total += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
    return offsets, max(total, ALIGN)


def pinned_buffer(nbytes: int) -> torch.Tensor:
    """A uint8 host buffer in page-locked memory (raises without CUDA)."""
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


def stage(fields: dict[str, torch.Tensor], device: torch.device, *,
          allocate: Callable[[int], torch.Tensor] = pinned_buffer,
          transfer: Callable[[torch.Tensor], torch.Tensor] | None = None
          ) -> dict[str, torch.Tensor]:
    """Host tensors moved to `device` through one staging buffer and one copy.

    Args:
        fields: name -> host tensor (any dtype and shape).
        device: the target; "cpu" returns `fields` unchanged.
        allocate: makes the staging buffer (default: pinned memory).
        transfer: copies the packed buffer to the device (default: `.to(device,
            non_blocking=True)` on torch's current stream).
    Returns:
        name -> tensor on `device`, same dtype, shape and values.
    """
    if device.type == "cpu" or not fields:
        return dict(fields)
    offsets, total = layout(fields)
    buffer = allocate(total)
    for name, t in fields.items():
        _view(buffer, offsets[name], t.dtype, t.shape).copy_(t)
    moved = transfer(buffer) if transfer is not None else buffer.to(device, non_blocking=True)
    return {name: _view(moved, offsets[name], t.dtype, t.shape) for name, t in fields.items()}


def _view(buffer: torch.Tensor, offset: int, dtype: torch.dtype, shape) -> torch.Tensor:
    nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
    return buffer[offset:offset + nbytes].view(dtype).view(shape)


def on_device(name: str, value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`value` on `device`, copied once per (name, device) and cached (constants such as
    normalisation mean / std; `name` must identify the value)."""
    key = (name, str(device))
    cached = _CONSTANTS.get(key)
    if cached is None:
        cached = _CONSTANTS[key] = value.to(device)
    return cached
