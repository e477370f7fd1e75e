"""The Source seam: what every source answers, whatever its modality or store.

A source is an index-addressable listing: `len()`, a label and a source id per sample, the
sample's file (or object, or shard member) for messages, and a digest of the listing that
resume compares. How a sample's bytes are read is the modality's own (`read_checked` for
images, `read_segment` for clips, `read_patch` for cubes); the loader, the samplers and the
tools only use what is declared here. Optional members have their defaults here: a class
that subclasses `Source` inherits them.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Source(Protocol):
    """An index-addressable listing of samples (numpy only, picklable)."""

    # Sources of named classes also have `classes`, the names in label order (label maps
    # of hyperspectral scenes have none; `Loader.classes` says so).
    labels: np.ndarray  # int64, one per sample
    source_ids: np.ndarray  # int64, one per sample: the position of its folder in `data`

    def __len__(self) -> int:
        """Samples in the listing."""
        ...

    def path(self, index: int) -> str:
        """The file, object or shard member of sample `index`, for messages."""
        ...

    def listing_digest(self) -> str:
        """A digest of what the listing holds (names, sizes, versions): a resumed loader
        refuses a listing whose digest changed."""
        ...

    def close(self) -> None:
        """Release what the source holds open (memory maps, handles); default: nothing."""
        return None
