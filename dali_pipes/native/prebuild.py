"""Compile every native operator before anything is timed, with one progress line.

A benchmark calls `prebuild()` in its parent process before it starts measuring: the
operators missing from the cache are compiled there, several at a time, behind a line
such as "building native operators (one time, ~16 s) ...", so no measuring process pays
for a compiler run inside a timed section, and none compiles silently. When everything is
cached it prints nothing and takes well under a second. An operator that cannot be built
is reported in one line; the loaders then use DALI's own operators, as they would anyway.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from dali_pipes.native import OPERATORS, enabled
from dali_pipes.native.builder import BUILD_S, build, is_cached

LINE = 80  # the longest line printed


def _missing(names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(the operators to compile, {operator: why it cannot be built})."""
    missing, failed = [], {}
    for name in names:
        try:
            if not is_cached(name):
                missing.append(name)
        except Exception as exc:  # no compiler, no headers, no DALI: reported, not fatal
            failed[name] = f"{type(exc).__name__}: {exc}"
    return missing, failed


def _build_one(name: str) -> str | None:
    """None once built, else why not."""
    try:
        build(name, announce=False)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def prebuild(names: Sequence[str] = OPERATORS, *, say: Callable[[str], None] = print,
             jobs: int | None = None) -> dict[str, str]:
    """Compile the operators `names` that are not cached yet, `jobs` at a time (default:
    one per core, at most 4); `say` gets the progress lines (each at most 80 columns).

    Returns:
        {operator: why it cannot be built} (empty when every operator is ready, or when
        DALI_PIPES_NATIVE turns them off).
    """
    if not enabled():
        return {}
    missing, failed = _missing(names)
    if missing:
        jobs = max(1, min(jobs or min(4, os.cpu_count() or 1), len(missing)))
        estimate = BUILD_S * math.ceil(len(missing) / jobs)
        say(f"building native operators (one time, ~{estimate:.0f} s) ...")
        start = time.monotonic()
        with ThreadPoolExecutor(jobs) as pool:
            outcomes = dict(zip(missing, pool.map(_build_one, missing), strict=True))
        failed.update({n: why for n, why in outcomes.items() if why is not None})
        built = len(missing) - sum(why is not None for why in outcomes.values())
        say(f"built {built} native operator(s) in {time.monotonic() - start:.0f} s")
    for name, why in failed.items():
        say(_fit(f"native operator {name} unavailable (DALI's own operators instead): "
                 f"{why.splitlines()[0]}"))
    return failed


def _fit(line: str) -> str:
    """`line` cut to LINE columns (with "...")."""
    return line if len(line) <= LINE else line[:LINE - 3] + "..."
