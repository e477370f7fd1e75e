"""What a torch DataLoader loop reads besides the batches: `loader.dataset`,
`loader.sampler` and `loader.batch_sampler`.

Training scripts written for `torch.utils.data.DataLoader` reach through the loader:
torchvision's reference `evaluate()` compares `len(data_loader.dataset)` with the samples
it saw, DistributedSampler users call `loader.sampler.set_epoch(epoch)`, timm's `train.py`
calls `set_epoch` on the dataset or the sampler, Lightning and Accelerate read
`batch_sampler`. These views answer from the loader's plan and source, so they always
agree with what the loader yields: every `set_epoch` is the loader's own, and the order
they list is the plan's for the loader's current epoch.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

if TYPE_CHECKING:
    from torch_bridge.order.plan import EpochPlan
    from torch_bridge.protocols import Modality


class Loader(Protocol):
    """What the views read of `torch_bridge.loader.Loader` (declared here: the loader
    imports this module)."""

    plan: EpochPlan
    epoch: int

    def __len__(self) -> int: ...

    def set_epoch(self, epoch: int) -> None: ...

    @property
    def classes(self) -> list[str]: ...

    @property
    def class_to_idx(self) -> dict[str, int]: ...


class DatasetView:
    """`loader.dataset`: the whole data set (every rank's samples), sized and indexable.

    `len()` is the samples of the listing. `dataset[i]` is sample i as a Dataset gives
    it: its fields decoded as the torch path's workers decode them (`load`), its label
    and other per-sample fields, and "path", its file. `info(i)` is the same without
    the decoded data, cheap (no file is read): "label", "index", per modality
    "position", "scene", "image_id", "source_id", ... (Python scalars, tensors for
    fields with more than one value) and "path".
    """

    def __init__(self, loader: Loader, modality: Modality):
        self._loader, self._modality = loader, modality

    def __len__(self) -> int:
        return len(self._modality)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {**self.load(index), **self.info(index)}

    def info(self, index: int) -> dict[str, Any]:
        """Sample `index`'s fields that need no decoding, and its "path" (no file read)."""
        i = self._index(index)
        entry: dict[str, Any] = {name: _scalar(values[0]) for name, values
                                 in self._modality.meta(np.array([i], np.int64)).items()}
        entry["path"] = str(self._modality.path(i))
        return entry

    def _index(self, index: int) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"loader.dataset indices are ints, got {index!r}")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for the {n} samples of the "
                             f"data set")
        return int(index) % n

    def load(self, index: int, epoch: int | None = None) -> dict[str, torch.Tensor]:
        """Sample `index` read and decoded in this process as the torch backend's
        DataLoader workers read it: its augmentation for (seed, `epoch`, its first draw),
        before the batch-level steps (normalisation, mixing), e.g. image pixels as
        uint8 (3, H, W).

        Args:
            index: the data set index.
            epoch: the epoch whose augmentation applies (default: the loader's).

        Returns:
            Field name -> tensor.
        """
        i = self._index(index)
        return self._modality.load(self._loader.epoch if epoch is None else int(epoch), i)

    def set_epoch(self, epoch: int) -> None:
        """`loader.set_epoch(epoch)` (timm's train.py calls it on the dataset)."""
        self._loader.set_epoch(epoch)

    @property
    def classes(self) -> list[str]:
        """`loader.classes`, as torchvision's ImageFolder has them."""
        return self._loader.classes

    @property
    def class_to_idx(self) -> dict[str, int]:
        """`loader.class_to_idx`."""
        return self._loader.class_to_idx

    def __repr__(self) -> str:
        return f"<loader.dataset: {len(self)} {self._modality.name} samples>"


class SamplerView:
    """`loader.sampler`: this rank's indices of the loader's current epoch, in order.

    `len()` is the samples this rank yields per epoch (those of the epoch's batches, padding
    included; under on_error="skip" a skipped one is still counted). `set_epoch(e)` is
    `loader.set_epoch(e)`. The attributes of torch's DistributedSampler are there too:
    `num_replicas`, `rank`, `shuffle`, `seed`, `drop_last`, `epoch`.
    """

    def __init__(self, loader: Loader):
        self._loader = loader

    @property
    def _plan(self) -> EpochPlan:
        return self._loader.plan

    def __len__(self) -> int:
        return rank_samples(self._plan, self._loader.epoch)

    def __iter__(self) -> Iterator[int]:
        for batch in BatchSamplerView(self._loader):
            yield from batch

    def set_epoch(self, epoch: int) -> None:
        """`loader.set_epoch(epoch)`."""
        self._loader.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._loader.epoch

    @property
    def num_replicas(self) -> int:
        return self._plan.world_size

    @property
    def rank(self) -> int:
        return self._plan.rank

    @property
    def shuffle(self) -> bool:
        return self._plan.shuffle

    @property
    def seed(self) -> int:
        return self._plan.seed

    @property
    def drop_last(self) -> bool:
        return self._plan.drop_last


class BatchSamplerView:
    """`loader.batch_sampler`: this rank's batches of the loader's current epoch, each a
    list of data set indices. `len()` is `len(loader)`; `set_epoch(e)` is
    `loader.set_epoch(e)`; `batch_size`, `drop_last` and `sampler` as on torch's
    BatchSampler."""

    def __init__(self, loader: Loader):
        self._loader = loader

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[list[int]]:
        for _, indices, _ in self._loader.plan.keyed_batches(self._loader.epoch):
            yield indices.tolist()

    def set_epoch(self, epoch: int) -> None:
        """`loader.set_epoch(epoch)`."""
        self._loader.set_epoch(epoch)

    @property
    def batch_size(self) -> int:
        return self._loader.plan.batch_size

    @property
    def drop_last(self) -> bool:
        return self._loader.plan.drop_last

    @property
    def sampler(self) -> SamplerView:
        return SamplerView(self._loader)


def rank_samples(plan: EpochPlan, epoch: int) -> int:
    """Entries of this rank's batches of `epoch` (a whole epoch's, or what an elastic resume
    left of it): the batches' sizes added up."""
    batches = plan.num_batches(epoch)
    if plan.drop_last:
        return batches * plan.batch_size
    resumed = plan.resumed
    if resumed is None or resumed.epoch != epoch:
        return plan.samples_per_rank
    return len(plan.rank_indices(epoch))


def _scalar(value: Any) -> Any:
    """A Python scalar for a 0-d value, else a tensor."""
    array = np.asarray(value)
    return array.item() if array.ndim == 0 else torch.from_numpy(np.array(array))
