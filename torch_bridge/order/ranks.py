"""This process's rank and the world size, from the arguments, the process group or the
launcher's environment, checked so that ranks cannot silently collide (numpy-free).

Each value comes from the first of: make_loader's `rank=` / `world_size=`, the initialised
`torch.distributed` process group (the caller passes it in: this package never imports
torch), the launcher's RANK / WORLD_SIZE (`dali_pipes.launch_env`), else rank 0 of 1. Refused
with a ValueError naming each value and where it came from:
- a world size below 1, or a rank outside [0, world_size);
- a world size above 1 without a rank from anywhere (`WORLD_SIZE=2` alone): every process
  would be rank 0 and read the same share, so the other shares would never be read (torch's
  own `env://` rendezvous refuses this too);
- with the world size from the environment, LOCAL_WORLD_SIZE above it (processes on one
  node that each believe they are alone);
- a world size above the data set's sample count (ranks that would read only padding; a
  typo such as WORLD_SIZE=10**12 would otherwise fail at the first batch, out of memory).
"""
from __future__ import annotations

from collections.abc import Mapping

from dali_pipes.launch_env import launch_env

Found = tuple[int | None, str]  # (value or None, where it came from)


def resolve_ranks(rank: int | None, world_size: int | None, *,
                  group: tuple[int, int] | None = None, samples: int | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(rank, world_size) of this process (see the module doc for the order and checks).

    Args:
        rank, world_size: make_loader's arguments (None: not given).
        group: (rank, world size) of the initialised torch.distributed process group.
        samples: the data set's sample count (None: not checked against it).
        environ: the environment (default: os.environ).
    """
    r: Found = (rank, "rank=")
    w: Found = (world_size, "world_size=")
    if rank is None or world_size is None:
        found = _found(group, environ)
        r = r if rank is not None else found[0]
        w = w if world_size is not None else found[1]
        if w[1] != "torch.distributed":
            _check_node(w, environ)
    return _checked(r, w, samples)


def _found(group: tuple[int, int] | None, environ) -> tuple[Found, Found]:
    if group is not None:
        return (group[0], "torch.distributed"), (group[1], "torch.distributed")
    env = launch_env(("RANK", "WORLD_SIZE"), environ)
    world: Found = ((env["WORLD_SIZE"], "WORLD_SIZE") if "WORLD_SIZE" in env
                    else (1, "WORLD_SIZE unset"))
    return (env.get("RANK"), "RANK"), world


def _check_node(w: Found, environ) -> None:
    """LOCAL_WORLD_SIZE processes on this node cannot outnumber the world."""
    node = launch_env(("LOCAL_RANK", "LOCAL_WORLD_SIZE"), environ).get("LOCAL_WORLD_SIZE", 1)
    if w[0] is not None and node > w[0]:
        raise ValueError(f"LOCAL_WORLD_SIZE={node} processes on this node, but world size "
                         f"{w[0]} ({w[1]}): each process would read the whole data set; "
                         f"set WORLD_SIZE and RANK for every process (torchrun sets them) "
                         f"or pass world_size= and rank=")


def _checked(r: Found, w: Found, samples: int | None) -> tuple[int, int]:
    world, rank = w[0], r[0]
    if world is None or world < 1:
        raise ValueError(f"world_size must be at least 1, got {world} ({w[1]})")
    if rank is None:
        if world > 1:
            raise ValueError(
                f"world size {world} ({w[1]}) but no rank (no rank=, no RANK): every "
                f"process would be rank 0 and {world - 1} of {world} shares of each epoch "
                f"would never be read; set RANK for every process (torchrun sets it) or "
                f"pass rank=")
        rank = 0
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} ({r[1]}) is outside [0, world_size) for world size "
                         f"{world} ({w[1]})")
    if samples is not None and world > samples:
        raise ValueError(f"world size {world} ({w[1]}) is larger than the data set's "
                         f"{samples} samples: the ranks beyond them would read only "
                         f"repeats; use at most {samples} ranks")
    return rank, world


__all__ = ["resolve_ranks"]
