"""The declared seams between plans, modalities and engines (`typing.Protocol`s).

    BatchPlan     what an engine reads from a plan (`EpochPlan`, the Dataset adapter's plan)
    DaliFeed      what `DaliEngine` calls on a modality: graph, feeds, meta, paths
    Modality      a registered modality: DaliFeed plus the torch reference path and source
    Engine        what `Loader` drives: `iterate(epoch, start)` and `close()`

Optional hooks are declared here with their defaults (`regroup`, `sample_feeds`,
`after_batch`, `parallel_feeds`, `augment_policy`, `padded_fields`, `multi_source`):
a class that subclasses the protocol explicitly inherits them, so engines and the loader
call every hook directly and never probe for it.

All are `runtime_checkable`, so `isinstance(x, Modality)` checks that every member exists
(not their signatures); tests/torch_bridge/test_protocols.py asserts that every registered
modality, both engines and the adapter's feed and plan conform.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from dali_pipes.pipelines.config import DaliDevice
    from dali_pipes.sources.protocol import Source
    from torch_bridge.stats import LoaderStats

Feeds = dict  # graph input name -> one batch of arrays (a list, or one dense array)


@runtime_checkable
class BatchPlan(Protocol):
    """The order an engine follows: batches of dataset indices for (epoch, rank). The three
    attributes are read-only (a frozen dataclass field, a class attribute or a property)."""

    # Read-only for an engine (EpochPlan exposes them as properties).
    @property
    def batch_size(self) -> int:
        """Samples per batch (the last batch of an epoch may hold fewer)."""
        ...

    @property
    def rank(self) -> int:
        """This process's rank."""
        ...

    @property
    def world_size(self) -> int:
        """The number of ranks sharing each epoch."""
        ...

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        ...

    def keyed_batches(self, epoch: int, start: int = 0
                      ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The batches of one pass.

        Args:
            epoch: the epoch whose order is wanted.
            start: the first batch position to yield.

        Returns:
            An iterator of (position, int64 indices, int64 augmentation keys).
        """
        ...


@runtime_checkable
class DaliFeed(Protocol):
    """What `DaliEngine` calls: it builds the graph, feeds each batch's inputs and attaches
    the fields that bypass the graph. Must not change when `build_pipeline` is called."""

    @property
    def dali_outputs(self) -> Sequence[str]:
        """The graph's output names, in the order the pipeline returns them (read-only: a
        class attribute or a property)."""
        ...

    def __len__(self) -> int:
        """Samples in the data set."""
        ...

    def path(self, index: int) -> str:
        """The file (or item name) of sample `index`, for error messages."""
        ...

    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: Any,
                       device_id: int | None = None) -> Any:
        """Define (not build) the modality's DALI graph.

        Args:
            device: "cpu" (DALI's CPU backend) or "gpu".
            batch_size: samples per batch.
            config: a `PipelineConfig` (decode preset).
            device_id: the GPU, or None on the CPU backend.

        Returns:
            A `nvidia.dali.Pipeline` whose outputs are `dali_outputs`, in order.
        """
        ...

    def feeds(self, epoch: int, indices: np.ndarray, guard: Any, keys: Any = None
              ) -> tuple[Feeds, np.ndarray]:
        """Read a batch and compute its parameters.

        Args:
            epoch: the plan's epoch (augmentation parameters depend on it).
            indices: int64 dataset indices of the batch.
            guard: the `SampleGuard` that records or raises per-sample failures.
            keys: the plan's augmentation keys (None: the indices).

        Returns:
            (graph input name -> arrays of the kept samples, int64 kept indices); the names
            equal the graph's inputs whenever any sample is kept.
        """
        ...

    # Whether `feeds` depends on nothing but (epoch, indices, keys, known-bad samples), so
    # feed workers may prepare batches ahead in other processes.
    parallel_feeds: bool = True
    # The augmentation policy of the graph ("randaugment", ...), None without one: a graph of
    # DALI's many small policy operators runs on a ring of pipelines (`pipe_ring`).
    augment_policy: str | None = None

    def regroup(self, batch: dict[str, Any], n_samples: int) -> dict[str, Any]:
        """The graph's outputs made into the batch (default: as they are).

        Args:
            batch: output name -> tensor, as the pipeline returned them.
            n_samples: the kept samples of the batch.

        Returns:
            The batch's fields (the frame-folder graph's per-frame outputs become clips).
        """
        return batch

    def sample_feeds(self, feeds: Feeds, position: int) -> Feeds:
        """The feeds of one sample of a batch, to run it alone (finding a failing sample).

        Args:
            feeds: graph input name -> the batch's arrays, as `feeds` returned them.
            position: the sample's position among the kept samples.

        Returns:
            graph input name -> a one-sample list (default: row `position` of each input).
        """
        return {name: [values[position]] for name, values in feeds.items()}

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Fields that bypass the graph (label, index, ...).

        Args:
            indices: int64 indices of a batch's kept samples, in output order.

        Returns:
            name -> numpy array with one row per index.
        """
        ...


@runtime_checkable
class Modality(DaliFeed, Protocol):
    """A registered modality: the DALI feed, plus what `TorchEngine`, `Loader` and the
    samplers use. Instances pickle (spawned workers receive them)."""

    name: str
    source: Source  # the listing: len(), labels, source_ids, path(i), listing_digest()
    multi_source: bool = False  # `data` was a list of folders: batches hold "source_id"
    # Dataclasses whose fields are constructor options taken through **options (each
    # option's default and type written there once; torch_bridge.options)
    option_groups: tuple[type, ...] = ()
    padded_fields: tuple[str, ...] = ()  # fields the torch collate pads along time

    def after_batch(self, batch: dict[str, Any], epoch: int, position: int
                    ) -> dict[str, Any]:
        """Batch-level work after either engine (default: none; images: mixing, output
        dtype and memory format).

        Args:
            batch: the batch on the loader's device.
            epoch: the plan's epoch.
            position: the batch's position in the epoch.

        Returns:
            The batch the training loop receives.
        """
        return batch

    def load(self, epoch: int, index: int, key: int | None = None) -> dict[str, Any]:
        """One sample for the torch reference path, in a DataLoader worker.

        Args:
            epoch: the plan's epoch.
            index: the dataset index.
            key: the plan's augmentation key (None: the index).

        Returns:
            name -> torch tensor (uint8 pixels; `finish` normalizes).
        """
        ...

    def finish(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Batch-level work on the target device (normalisation).

        Args:
            batch: the collated batch, name -> tensor on the device.

        Returns:
            The batch, with the graph's output fields as the DALI backend returns them.
        """
        ...


@runtime_checkable
class Engine(Protocol):
    """Runs a plan through a backend; `Loader` keeps the pass state around it."""

    stats: LoaderStats  # the Loader's; the engine adds its stage times to it

    @property
    def num_workers(self) -> int:
        """Worker processes preparing batches (0: they are prepared in this process)."""
        ...

    @property
    def modality(self) -> DaliFeed:
        """What it runs: the feeds and the graph (a `Modality`, its torch steps too, when
        made by make_loader)."""
        ...

    def iterate(self, epoch: int, start: int) -> Iterator[tuple[int, dict | None]]:
        """The batches of one pass.

        Args:
            epoch: the epoch to run.
            start: the first batch position (non-zero when resuming).

        Returns:
            An iterator of (position, batch dict of tensors, or None when every sample of
            that batch was skipped).
        """
        ...

    def close(self) -> None:
        """Stop workers and release the pipeline; a later `iterate` starts them again."""
        ...
