"""Your own Dataset, DALI's decoding: batches from a torch Dataset of encoded JPEGs.

A user's `Dataset` returns `(jpeg, label)` with the encoded file as `bytes`, a 1-D uint8
numpy array or a uint8 tensor; their `Sampler` chooses the order. A torch DataLoader reads
the items in worker processes (bytes stay encoded; only the JPEG header is parsed there),
and the main thread computes the augmentation parameters with `image_params` and runs our
image graph through `DaliEngine`, exactly as `make_loader("image", ...)` does. The same
files in the same order with the same seed and epoch therefore give the same pixels.

`bench/bench_adapter.py` compares this with DALI's proxy (`DALIServer`) running the same
graph: equal speed on the CPU; its docstring says why this design is the one kept.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, SequentialSampler

from dali_pipes.formats.image_kind import prepare_image
from dali_pipes.formats.jpeg import DEFAULT_MAX_PIXELS
from dali_pipes.geometry.draws import image_params
from dali_pipes.pipelines import image as image_graph
from dali_pipes.pipelines.config import DaliDevice, PipelineConfig, load_config
from torch_bridge.engines._workers import start_workers, stop_workers
from torch_bridge.engines.dali import DaliEngine
from torch_bridge.errors import SampleError, SampleGuard
from torch_bridge.loader import resolve_device
from torch_bridge.protocols import DaliFeed


def as_jpeg_array(data) -> np.ndarray:
    """Encoded image bytes (any format class folders take) as a 1-D uint8 numpy array (no
    copy where possible)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    if isinstance(data, torch.Tensor):
        data = data.detach().cpu().numpy()
    if isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1:
        return np.ascontiguousarray(data)
    shape = getattr(data, "shape", None)
    raise TypeError(f"expected the encoded image (JPEG, PNG, WebP, ...) as bytes, a 1-D "
                    f"uint8 numpy array or a "
                    f"uint8 tensor, got {type(data).__name__} (dtype "
                    f"{getattr(data, 'dtype', None)}, shape {shape})")


@dataclass
class RawBatch:
    """A batch as the DataLoader workers hand it over: still-encoded JPEGs."""

    indices: np.ndarray  # int64 (B,), dataset indices in sampler order
    jpegs: list  # B uint8 arrays
    sizes: np.ndarray  # int64 (B, 2): height, width from each JPEG header
    labels: np.ndarray  # int64 (B,)
    failures: list  # (index, "Type: message") of items that could not be read


class EncodedItems(Dataset):
    """Wraps the user's Dataset: (index, jpeg array, (h, w), label, failure or None).

    Failures are returned, not raised, so the consumer raises them with the index."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.name = type(dataset).__name__

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        index = int(index)
        try:
            data, label = self.dataset[index]
            encoded, size = prepare_image(as_jpeg_array(data), f"{self.name}[{index}]",
                                          max_pixels=DEFAULT_MAX_PIXELS)
            return index, encoded, size, int(label), None
        except Exception as exc:  # user code: carried to the consumer and raised there
            return index, None, (0, 0), 0, f"{type(exc).__name__}: {exc}"


def collate_encoded(items: list) -> RawBatch:
    """DataLoader collate: keep the bytes as a list of arrays, stack the rest."""
    good = [item for item in items if item[4] is None]
    return RawBatch(indices=np.array([item[0] for item in items], dtype=np.int64),
                    jpegs=[item[1] for item in good],
                    sizes=np.array([item[2] for item in good], dtype=np.int64).reshape(-1, 2),
                    labels=np.array([item[3] for item in good], dtype=np.int64),
                    failures=[(item[0], item[4]) for item in items if item[4] is not None])


class _DatasetPlan:
    """The plan DaliEngine follows (`protocols.BatchPlan`): the batches of the DataLoader over
    the user's sampler, one process (rank 0 of 1). The batch it yields last waits in `take`
    for the feed."""

    rank, world_size = 0, 1

    def __init__(self, loader: DataLoader, *, batch_size: int, samples: int):
        self.loader, self.batch_size, self.samples = loader, batch_size, samples
        self._raw: RawBatch | None = None  # the batch just yielded, until taken

    def __len__(self) -> int:
        return len(self.loader)

    def keyed_batches(self, epoch: int, start: int = 0
                      ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(position, indices, augmentation keys): the user's sampler decides the order, and
        the dataset index is the key (`image_params(seed, epoch, index, ...)`)."""
        if start != 0:
            raise ValueError("a Dataset adapter pass cannot start in the middle of an epoch")
        self._raw = None
        for position, raw in enumerate(start_workers(self.loader)):
            self._raw = raw
            yield position, raw.indices, raw.indices

    def take(self, indices: np.ndarray) -> RawBatch:
        """The raw batch whose `indices` the plan yielded last (once)."""
        raw, self._raw = self._raw, None
        if raw is None or raw.indices is not indices:
            raise RuntimeError("DaliEngine asked for feeds of a batch the plan did not yield")
        return raw

    def stop_workers(self) -> None:
        stop_workers(self.loader)


class _DatasetFeed(DaliFeed):
    """The image graph's feed for the plan's raw batches: crop parameters from the JPEG
    headers, labels kept until DALI returns the batch. Its feeds take the DataLoader's
    batches in order, so they are prepared here, never in feed workers."""

    dali_outputs = image_graph.OUTPUTS
    parallel_feeds = False

    def __init__(self, plan: _DatasetPlan, *, size: int, train: bool, seed: int, name: str):
        self.plan, self.size, self.train, self.seed, self.name = plan, size, train, seed, name
        self._labels: deque = deque()  # (indices, labels) fed, in the order DALI returns them

    def __len__(self) -> int:
        return self.plan.samples

    def path(self, index: int) -> str:
        return f"{self.name}[{index}]"

    def build_pipeline(self, *, device: DaliDevice, batch_size: int, config: PipelineConfig,
                       device_id: int | None = None):
        return image_graph.build_image_pipeline(device=device, batch_size=batch_size,
                                                size=self.size, config=config,
                                                device_id=device_id)

    def feeds(self, epoch: int, indices: np.ndarray, guard: SampleGuard, keys=None):
        """The graph's inputs for a batch the plan yielded; SampleError for a bad item."""
        raw = self.plan.take(indices)
        if raw.failures:
            index, reason = raw.failures[0]
            raise SampleError(f"sample {index} ({self.path(index)}): {reason}",
                              index=index, path=self.path(index))
        windows, flip = image_params(self.seed, epoch, raw.indices, raw.sizes[:, 0],
                                     raw.sizes[:, 1], size=self.size, train=self.train)
        windows = windows.astype(np.int32)
        self._labels.append((raw.indices, raw.labels))
        return {"jpegs": raw.jpegs, "anchor": list(windows[:, :2]),
                "shape": list(windows[:, 2:]), "mirror": list(flip.astype(np.int32))
                }, raw.indices

    def meta(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        fed, labels = self._labels.popleft()
        if not np.array_equal(fed, indices):
            raise RuntimeError(f"DALI output order does not match feed order: batch of "
                               f"indices {fed[:4].tolist()}... came back as {indices[:4]}...")
        return {"label": labels, "index": indices}

    def reset(self) -> None:
        """Forget labels of batches fed for a pass that ended (a new pass starts clean)."""
        self._labels.clear()


class DatasetLoader:
    """Batches of `{"image", "label", "index"}` from a user's Dataset and Sampler.

    `len()` is the DataLoader's batch count. A full pass advances the epoch by one;
    `set_epoch(e)` chooses the epoch of the next pass (the augmentation's, and the
    sampler's when it has `set_epoch`). Workers persist across passes; `close()` (or a
    `with` block) ends them. A loader left to the cyclic garbage collector stalls 5 s per
    worker there, as any torch DataLoader with persistent workers does.
    """

    def __init__(self, plan: _DatasetPlan, feed: _DatasetFeed, engine: DaliEngine, sampler):
        self._plan, self._feed, self._engine, self.sampler = plan, feed, engine, sampler
        self.epoch = 0

    def __len__(self) -> int:
        return len(self._plan)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        epoch = self.epoch
        self._feed.reset()
        try:
            for _, batch in self._engine.iterate(epoch, 0):
                if batch is not None:
                    yield batch
        except Exception:  # a bad item or a DALI error: no workers left behind
            self._plan.stop_workers()
            raise
        self.set_epoch(epoch + 1)

    def close(self) -> None:
        """Release the pipeline and the DataLoader workers (a later pass restarts them)."""
        self._plan.stop_workers()
        self._engine.close()

    def __enter__(self) -> DatasetLoader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def dali_from_dataset(dataset: Dataset, sampler: Sampler | None = None, *,
                      batch_size: int = 64, device: str = "cpu", size: int = 224,
                      train: bool = True, seed: int = 0, num_workers: int = 2,
                      config=None, drop_last: bool = False) -> DatasetLoader:
    """DALI decoding and augmentation for a Dataset of `(encoded JPEG, label)` items.

    The batch schema is the image loader's: "image" float32 (B, 3, size, size) normalized
    with ImageNet mean/std, "label" int64 (B,), "index" int64 (B,) (the sampler's indices).
    `train`: random resized crop + flip (True) or resize + centre crop; parameters come from
    `image_params(seed, epoch, index, ...)`. `num_workers`: DataLoader processes reading
    items (0 reads in the main thread). `device`: "cpu", "cuda" or "cuda:N" ("cuda" decodes
    on the GPU). `config`: a decode preset, as in `make_loader`. An item that cannot be
    read or decoded raises SampleError naming its index.
    """
    dev = _check_options(device, batch_size, size, num_workers)
    items = EncodedItems(dataset)
    sampler = SequentialSampler(items) if sampler is None else sampler
    loader = DataLoader(items, batch_size=batch_size, sampler=sampler,
                        num_workers=num_workers, collate_fn=collate_encoded,
                        drop_last=drop_last, persistent_workers=num_workers > 0)
    plan = _DatasetPlan(loader, batch_size=batch_size, samples=len(items))
    feed = _DatasetFeed(plan, size=size, train=train, seed=seed, name=type(dataset).__name__)
    # No running ahead into the next epoch: the user's sampler decides what comes next.
    engine = DaliEngine(feed, plan, device=dev, config=load_config(config),
                        guard=SampleGuard("raise"), run_ahead=False)
    return DatasetLoader(plan, feed, engine, sampler)


def _check_options(device, batch_size: int, size: int, num_workers: int) -> torch.device:
    for name, value, low in (("batch_size", batch_size, 1), ("size", size, 1),
                             ("num_workers", num_workers, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return resolve_device(device)
