"""Moving DALI outputs into torch tensors on the requested device."""
from __future__ import annotations

import numpy as np
import torch
from nvidia.dali.backend import TensorListCPU, TensorListGPU


def dali_to_torch(tensor_list, device: torch.device) -> torch.Tensor:
    """A dense (B, ...) torch tensor on `device` from a uniform TensorList: a copy on the
    GPU (into memory torch owns), a zero-copy view of DALI's buffer on the CPU."""
    from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type

    if isinstance(tensor_list, TensorListGPU):
        dense = tensor_list.as_tensor()
        out = torch.empty(dense.shape(), dtype=to_torch_type[dense.dtype], device=device)
        feed_ndarray(dense, out, cuda_stream=torch.cuda.current_stream(device))
        return out
    if not isinstance(tensor_list, TensorListCPU):
        raise TypeError(f"expected a DALI TensorList, got {type(tensor_list).__name__}")
    # Zero copy: DALI's dynamic executor never reuses an output buffer that is still
    # referenced, and the DLPack capsule keeps a reference for as long as the tensor lives.
    # A GPU graph also has CPU outputs (pass-through timestamps, IMU, lengths): copied over.
    out = torch.from_dlpack(tensor_list.as_tensor())
    return out if device.type == "cpu" else out.to(device)


def attach_meta(batch: dict, modality, kept: np.ndarray, device: torch.device) -> dict:
    """Add the fields that bypass decoding (labels, indices, source ids) to a batch."""
    for name, values in modality.meta(np.asarray(kept, dtype=np.int64)).items():
        batch[name] = torch.from_numpy(np.ascontiguousarray(values)).to(device)
    return batch
