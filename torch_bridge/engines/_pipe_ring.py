"""Several DALI pipelines of one graph taking batches in turn, driven as one.

DALI's CPU executor runs one operator at a time, each spreading its samples over the
pipeline's threads; a graph of many small operators (an augmentation policy's conditional
branches) leaves those threads waiting between operators. Independent pipelines have
independent executors, so two of them, each with its own share of the threads, keep the
cores busy while either waits. `PipeRing` offers the part of the `Pipeline` interface the
engine uses (`build`, `feed_input`, `schedule_run`, `outputs`): batch k goes to pipeline
k % n and the outputs are taken in the same turn, so they come back in the order fed.

Each member is built with `prefetch_queue_depth=1`: every `schedule_run` of a member, its
first included, runs exactly the one batch fed to it. A `schedule_run` on the ring sends
every batch fed since the previous one, each to the next member in turn.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dali_pipes.pipelines.config import PipelineConfig, usable_cores


class PipeRing:
    """Pipelines of one graph, each built with prefetch_queue_depth=1, used in turn."""

    def __init__(self, pipes: Sequence):
        if not pipes:
            raise ValueError("PipeRing needs at least one pipeline")
        self.pipes = list(pipes)
        self._staged: list[dict] = []  # batches fed since the last schedule_run
        self._sent = 0  # batches scheduled so far (the next goes to _sent % n)
        self._taken = 0  # outputs taken so far (the next comes from _taken % n)

    @property
    def first(self):
        """The first member (its declared inputs are every member's)."""
        return self.pipes[0]

    def build(self) -> None:
        for pipe in self.pipes:
            pipe.build()

    def feed_input(self, name: str, arrays) -> None:
        """One input of a batch; a name already given for the batch being staged starts
        the next batch (the engine feeds a batch's inputs once each, batch after batch)."""
        if not self._staged or name in self._staged[-1]:
            self._staged.append({})
        self._staged[-1][name] = arrays

    def schedule_run(self) -> None:
        """Run every staged batch, each on the next member in turn."""
        staged, self._staged = self._staged, []
        for feeds in staged:
            pipe = self.pipes[self._sent % len(self.pipes)]
            for name, arrays in feeds.items():
                pipe.feed_input(name, arrays)
            pipe.schedule_run()
            self._sent += 1

    def outputs(self):
        """The next batch's outputs, in the order the batches were scheduled."""
        if self._taken >= self._sent:
            raise RuntimeError(f"PipeRing: output {self._taken} asked for, but only "
                               f"{self._sent} batches were scheduled")
        pipe = self.pipes[self._taken % len(self.pipes)]
        self._taken += 1
        return pipe.outputs()


def pipeline_count(config: PipelineConfig, modality, device: str) -> int:
    """How many pipelines the engine runs: `config.pipelines`, or (0, the default) 2 for a
    graph with an augmentation policy made of DALI's own operators (its many small
    operators leave threads idle) on DALI's CPU backend with at least 2 usable cores, else
    1. Where the fused policy operator is available the policy is one operator and one
    pipeline keeps the cores busy."""
    if config.pipelines > 0:
        return config.pipelines
    if not (device == "cpu" and modality.augment_policy and usable_cores() >= 2):
        return 1
    from dali_pipes.recipes.policies_graph import native_policy

    return 1 if config.native_ops and native_policy() else 2


def ring_member_config(config: PipelineConfig, count: int) -> PipelineConfig:
    """A member's config: prefetch_queue_depth 1 (the engine keeps its own depth in flight
    over the ring) and its share of the threads, rounded up."""
    return dataclasses.replace(config, prefetch_queue_depth=1,
                               num_threads=max(1, -(-config.threads() // count)))
