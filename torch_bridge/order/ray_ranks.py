"""Ray Train: this worker's rank and world size from Ray's own context (a rank source beside
the environment's, `torch_bridge.order.ranks`).

Under `ray.train.torch.TorchTrainer` the process group Ray Train initialises already gives
make_loader the rank and world size. `train_ranks` covers Ray Train workers without one
(a `DataParallelTrainer` with another backend than torch's, such as JAX's): make_loader
reads `ray.train.get_context()` there, after the process group and ahead of the RANK /
WORLD_SIZE environment.

It never imports Ray: a process that has not imported `ray.train` is not a Ray Train worker
(Ray Train's worker actors import it before they run the training function), so make_loader
pays nothing outside Ray. Ray Train 2 only (the default since Ray 2.51), whose
`get_context()` raises outside a training function; Ray Train 1's (RAY_TRAIN_V2_ENABLED=0)
answers rank 0 of 1 there, with a warning, so it is not asked. See docs/ray.md.
"""
from __future__ import annotations

import os
import sys


def train_ranks() -> tuple[int, int] | None:
    """(world rank, world size) of this Ray Train worker; None in any other process (no
    `ray.train` imported, a Ray driver, a Ray task or actor, a Ray Tune trial) and under
    Ray Train 1."""
    train = sys.modules.get("ray.train")
    if train is None or not _ray_train_2():
        return None
    try:
        context = train.get_context()
    except (RuntimeError, DeprecationWarning):
        # RuntimeError: not inside a Ray Train training function; DeprecationWarning: a
        # Ray Tune trial, where Ray Train's context is refused (one process: rank 0 of 1)
        return None
    return int(context.get_world_rank()), int(context.get_world_size())


def _ray_train_2() -> bool:
    """Ray's own reading of RAY_TRAIN_V2_ENABLED: unset, "1" or "true" (any case)."""
    value = os.environ.get("RAY_TRAIN_V2_ENABLED")
    return value is None or value.lower() in ("1", "true")


__all__ = ["train_ranks"]
