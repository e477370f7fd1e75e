"""Batching samples whose time axis differs in length: pad, and say where the padding is.

The torch backend's counterpart of the DALI graphs' `fn.pad` (pad="variable" on the clip
modalities): every field named in `time_fields` (a modality's `padded_fields`: the schema's
fields with a time axis, `dali_pipes.schema.BatchSchema.time_fields`) is padded along its
first axis with zeros
(False for booleans) to the longest sample of the batch, and the batch gains
  "length" int64 (B,)    real positions of each sample
  "mask"   bool  (B, T)  True at the first `length` positions
Every other field is stacked as is. Any other difference in shape (frames of two
resolutions, IMU with another channel count) raises ValueError naming each sample.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def pad_batch(samples: Sequence[dict[str, torch.Tensor]], time_fields: Sequence[str],
              names: Sequence[str]) -> dict[str, torch.Tensor]:
    """One batch from `samples`; `names[i]` describes sample i in errors (index and file)."""
    present = [name for name in time_fields if name in samples[0]]
    if not present:
        raise ValueError(f"pad_batch: none of the time fields {list(time_fields)} is in the "
                         f"samples (fields: {sorted(samples[0])})")
    lengths = torch.tensor([len(s[present[0]]) for s in samples], dtype=torch.int64)
    out = {}
    for name in samples[0]:
        values = [s[name] for s in samples]
        if name in present:
            _check_lengths(name, values, lengths, names)
            out[name] = pad_time(values, int(lengths.max()), name, names)
        else:
            out[name] = stack(values, name, names)
    out["length"] = lengths
    out["mask"] = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
    return out


def pad_time(values: Sequence[torch.Tensor], length: int, name: str,
             names: Sequence[str]) -> torch.Tensor:
    """(B, length, ...) with each value copied to the front of its row, zeros after."""
    _check_shapes(name, [tuple(v.shape[1:]) for v in values], values, names)
    first = values[0]
    out = torch.zeros((len(values), length, *first.shape[1:]), dtype=first.dtype)
    for row, value in enumerate(values):
        out[row, :len(value)] = value
    return out


def stack(values: Sequence[torch.Tensor], name: str, names: Sequence[str]) -> torch.Tensor:
    """torch.stack, or ValueError naming every sample when their shapes differ."""
    _check_shapes(name, [tuple(v.shape) for v in values], values, names)
    return torch.stack(list(values))


def _check_shapes(name: str, shapes: list[tuple], values, names: Sequence[str]) -> None:
    if len(set(shapes)) > 1:
        files = ", ".join(f"{n} {tuple(v.shape)}" for n, v in zip(names, values, strict=False))
        raise ValueError(f"cannot batch {name!r}: samples differ in shape ({files})")


def _check_lengths(name: str, values, lengths: torch.Tensor, names: Sequence[str]) -> None:
    bad = [f"{n}: {len(v)} vs {int(k)}" for n, v, k in zip(names, values, lengths, strict=False)
           if len(v) != int(k)]
    if bad:
        raise ValueError(f"cannot pad {name!r}: its time axis differs from the sample's other "
                         f"time fields ({'; '.join(bad[:4])})")
