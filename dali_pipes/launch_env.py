"""The launcher's rank variables, read and checked in one place (plain Python: no numpy).

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE for every process (our
SLURM / Kubernetes launch recipes set them too). Each is read here: an integer in ASCII
digits, at least 0 (ranks) or 1 (sizes), and a rank below its size when both are set.
Anything else is a ValueError naming the variables and their values, never a default or a
bare `int()` error. Which rank a loader takes (its arguments, then the process group, then
these) is decided in `torch_bridge.order.ranks`.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
LOCAL = ("LOCAL_RANK", "LOCAL_WORLD_SIZE")
_LEAST = {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": 1}
_PAIRS = (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE"))
_INTEGER = re.compile(r"\s*-?[0-9]+\s*")


def launch_env(names: tuple[str, ...] = NAMES,
               environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """The variables of `names` that are set, as ints (unset ones are left out).

    Args:
        names: which of NAMES to read; a rank is checked against its size when both are
            read and set.
        environ: the environment (default: os.environ).

    Returns:
        {name: value}; ValueError naming the variables and their values for a value that
        is not an integer, a rank below 0, a size below 1, or a rank not below its size.
    """
    env = os.environ if environ is None else environ
    given = {name: env[name] for name in names if name in env}
    values = {}
    for name, text in given.items():
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"{name}={text!r} is not an integer{_context(given)}")
        values[name] = int(text)
        if values[name] < _LEAST[name]:
            raise ValueError(f"{name}={text!r} must be at least {_LEAST[name]}"
                             f"{_context(given)}")
    for rank, size in _PAIRS:
        if rank in values and size in values and values[rank] >= values[size]:
            raise ValueError(f"{rank}={given[rank]!r} is not below {size}={given[size]!r} "
                             f"(ranks count from 0){_context(given)}")
    return values


def local_world_size(environ: Mapping[str, str] | None = None) -> int:
    """Processes sharing this node: LOCAL_WORLD_SIZE, else 1 (checked as `launch_env`)."""
    return launch_env(LOCAL, environ).get("LOCAL_WORLD_SIZE", 1)


def local_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's rank on its node: LOCAL_RANK, else None (checked as `launch_env`)."""
    return launch_env(LOCAL, environ).get("LOCAL_RANK")


def _context(given: Mapping[str, str]) -> str:
    shown = ", ".join(f"{name}={text!r}" for name, text in given.items())
    return f" (environment: {shown})" if len(given) > 1 else ""


__all__ = ["LOCAL", "NAMES", "launch_env", "local_rank", "local_world_size"]
