"""Training functions the tests of test_ray_train.py hand to Ray Train; they run in Ray's
worker processes, which import this module (the test fixture puts the repository on their
PYTHONPATH).

Each worker writes what it saw to `config["out"]/rank<world rank>.json`: Ray Train 2 reports
metrics only from rank 0, and every rank's view is what the tests check.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch

STATE_FILE = "loaders.pt"


def loader_options(backend: str, workers: int) -> dict:
    """make_loader options for `backend` with `workers` worker processes (forked from the
    Ray worker: DALI's feed workers, or the torch path's DataLoader workers)."""
    if backend == "dali":
        return {"config": {"py_num_workers": workers}}
    return {"reference": {"num_workers": workers}}


def record_epochs(config: dict) -> None:
    """For each backend: a loader on this worker's device, resumed from the loader states in
    `config["resume"]` (a ray.train.Checkpoint) when given; it runs whole epochs up to
    `config["epochs"]`, and the last one only `config["stop_after"]` batches when set.
    Rank 0 then reports every backend's loader state in a checkpoint. `config["options"]`:
    more make_loader options (a bucket's storage_options)."""
    import ray.train
    import ray.train.torch

    from torch_bridge import make_loader
    from torch_bridge.order.ray_ranks import train_ranks

    context = ray.train.get_context()
    rank = context.get_world_rank()
    states = _load_states(config.get("resume"))
    record: dict = {"train_ranks": train_ranks(),
                    "process_group": torch.distributed.is_initialized(), "backends": {}}
    loaders = {}
    for backend in config["backends"]:
        loader = make_loader("image", config["data"], backend=backend,
                             batch_size=config["batch_size"], size=16, seed=config["seed"],
                             device=ray.train.torch.get_device(),
                             **loader_options(backend, config.get("workers", 0)),
                             **config.get("options", {}))
        if backend in states:
            loader.load_state_dict(states[backend])
        record["backends"][backend] = {"plan": [loader.plan.rank, loader.plan.world_size],
                                       "epochs": _run(loader, config)}
        loaders[backend] = loader
    Path(config["out"], f"rank{rank}.json").write_text(json.dumps(record))
    _report({b: loader.state_dict() for b, loader in loaders.items()}, rank)
    for loader in loaders.values():
        loader.close()


def _run(loader, config: dict) -> dict[str, list[int]]:
    """epoch -> the sample indices this worker took in it."""
    seen: dict[str, list[int]] = {}
    for epoch in range(loader.epoch, config["epochs"]):
        loader.set_epoch(epoch)
        last = epoch == config["epochs"] - 1
        for taken, batch in enumerate(loader, start=1):
            seen.setdefault(str(epoch), []).extend(batch["index"].tolist())
            if last and taken == config.get("stop_after"):
                break
    return seen


def _load_states(checkpoint) -> dict:
    if checkpoint is None:
        return {}
    with checkpoint.as_directory() as folder:
        return torch.load(os.path.join(folder, STATE_FILE))


def _report(states: dict, rank: int) -> None:
    """Every worker reports (Ray Train 2 waits for all); rank 0's states are the checkpoint:
    under DDP all ranks stop at the same batch, so one rank's state is enough."""
    import ray.train

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if rank == 0:
            torch.save(states, os.path.join(folder, STATE_FILE))
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        ray.train.report({"rank": rank}, checkpoint=checkpoint)


def tune_trial(config: dict) -> None:
    """A Ray Tune trial (one process, where Ray Train's context is refused) reporting its
    loader's rank, world size and the samples of one epoch."""
    import ray.tune

    from torch_bridge import make_loader

    loader = make_loader("image", config["data"], backend="torch", batch_size=2, size=16,
                         reference={"num_workers": 0})
    seen = sum(len(batch["index"]) for batch in loader)
    ray.tune.report({"rank": loader.plan.rank, "world_size": loader.plan.world_size,
                     "samples": seen})
