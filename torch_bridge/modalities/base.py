"""What every modality does the same way, from its index-addressable `source`."""
from __future__ import annotations

import numpy as np


def aug_keys(indices, keys=None) -> np.ndarray:
    """The keys random augmentation parameters are drawn from: the plan's (`keys`,
    see torch_bridge.plan), or the indices themselves."""
    return np.atleast_1d(np.asarray(indices if keys is None else keys, dtype=np.int64))


class SourceModality:
    """Length, file paths and the fields that bypass decoding (label, index, source_id).

    Subclasses set `self.source` (with `labels`, `source_ids`, `path(i)`, `len()`) and call
    `_set_source`; `_extra_meta` adds their own per-sample fields.
    """

    def _set_source(self, source, data) -> None:
        self.source = source
        self.multi_source = isinstance(data, (list, tuple))

    def __len__(self) -> int:
        return len(self.source)

    def path(self, index: int) -> str:
        return self.source.path(index)

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Fields that do not pass through DALI: label, index, source_id and any extras."""
        out = {"label": self.source.labels[indices], "index": np.asarray(indices, np.int64)}
        out.update(self._extra_meta(indices))
        if self.multi_source:
            out["source_id"] = self.source.source_ids[indices]
        return out

    def _extra_meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return {}
