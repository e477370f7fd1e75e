"""What the DALI engine says when a batch fails: the culprit samples, and the epoch."""
from __future__ import annotations

import dataclasses

from dali_pipes.pipelines.config import PipelineConfig
from torch_bridge.engines._feeders import Prepared
from torch_bridge.errors import SampleError, SampleGuard, WorkerDied


def blame(modality, prepared: Prepared, epoch: int, exc: Exception, *, device: str,
          device_id: int | None, config: PipelineConfig, guard: SampleGuard) -> None:
    """Decode a batch that failed inside DALI sample by sample, in a pipeline of batch 1;
    each culprit is raised (on_error="raise") or marked bad in `guard` (it is skipped when
    the batch is prepared again).

    Args:
        modality: builds the probe pipeline; names the files.
        prepared: the failed batch's feeds and kept indices.
        epoch: the batch's epoch (for the message when no sample fails alone).
        exc: what DALI raised for the whole batch.
        device, device_id, config: as for the engine's pipeline.
        guard: applies on_error to each culprit.
    """
    probe = modality.build_pipeline(
        device=device, batch_size=1, device_id=device_id,
        config=dataclasses.replace(config, num_threads=1, prefetch_queue_depth=1))
    probe.build()
    culprits = []
    kept = prepared.kept.tolist()
    for i, index in enumerate(kept):
        one = modality.sample_feeds(prepared.feeds, i)
        for name, arrays in one.items():
            probe.feed_input(name, arrays)
        try:
            probe.run()
        except Exception as sample_exc:
            culprits.append((index, sample_exc))
    del probe
    if not culprits:
        files = ", ".join(modality.path(i) for i in kept[:8])
        raise SampleError(f"DALI failed on a batch of epoch {epoch} but no single sample "
                          f"fails alone (files: {files}, ...): {exc}") from exc
    for index, failure in culprits:
        guard.mark_bad(index, modality.path(index), failure)


def in_epoch(error: Exception, epoch: int, position: int) -> Exception:
    """`error` (raised preparing plan batch `position` of `epoch`) with a message naming
    that batch: a new SampleError or WorkerDied caused by it; any other error unchanged.

    Returns:
        the exception to raise
    """
    where = f"epoch {epoch}, batch {position}"
    named: SampleError | WorkerDied
    if isinstance(error, SampleError):
        named = SampleError(f"{where}: {error}", index=error.index, path=error.path)
    elif isinstance(error, WorkerDied):
        named = WorkerDied(f"{where}: {error}")
    else:
        return error
    named.__cause__ = error
    return named
