"""What a benchmark does once per machine, said as it is: the built-in sample data (written
behind a progress bar, or one line "sample photos: cached (PATH)" when it is there already)
and the native operators (compiled before anything is timed; the line announcing a build
gives the time the last build took here, and no estimate when there was none).

The last build's time is kept in `$DALI_PIPES_CACHE/bench/native-build.json` (default cache
~/.cache/dali-pipes), written after each build.
"""
from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from torch_bridge import registry

Say = Callable[[str], None]
BUILDING = "building native operators"  # how dali_pipes.native.prebuild announces a build


def what_is_made(description: str) -> str:
    """The data set a progress description names: "writing sample photos (first run
    only)" -> "sample photos"."""
    return re.sub(r"^writing |\s*\(.*\)$", "", description)


def made_once(make: Callable[..., Path], description: str, say: Say) -> Path:
    """`make(progress=...)`'s folder: a progress bar while it writes files; when it writes
    none (cached), one line saying so."""
    from dali_pipes.progress import progress_bar

    with contextlib.ExitStack() as stack:
        bars: list = []

        def progress(done: int, total: int) -> None:
            if not bars:  # the first file written: the bar starts
                bars.append(stack.enter_context(
                    progress_bar(None, description, unit="files", transient=True)))
            bars[0].update(done, total=total)

        folder = make(progress=progress)
    if not bars:
        say(f"{what_is_made(description)}: cached ({folder})")
    return folder


def sample_data(modality: str, sample: str = "default", say: Say = print) -> Path:
    """The cached built-in sample data set for `modality` (`sample`: default, large or
    real for images), created (with progress) if absent."""
    if modality not in registry.REGISTRY:
        raise SystemExit(f"--modality {modality}: built-in sample data not available yet")
    spec = registry.get(modality)
    make, description = spec.sample_maker(), spec.sample_note
    if sample != "default" and modality != "image":
        raise SystemExit(f"--sample {sample}: only for --modality image, not {modality}")
    if sample == "large":
        from dali_pipes.sample_data.sample_images import large_photo_dataset
        make, description = large_photo_dataset, "writing large sample photos (first run)"
    if sample == "real":
        from dali_pipes.sample_data.sample_real import real_photo_crops
        make, description = real_photo_crops, "writing crops of real photos (first run)"
    return made_once(make, description, say)


def _record() -> Path:
    from dali_pipes.sample_data.sample_images import cache_root
    return cache_root() / "bench" / "native-build.json"


def last_build_s() -> float | None:
    """Seconds the last native build took on this machine (None: no build recorded)."""
    try:
        return float(json.loads(_record().read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def build_native(say: Say) -> None:
    """Compile the native operators missing from the cache (dali_pipes.native.prebuild),
    announced with the last build's measured time; the time of a build that made every
    operator is recorded for the next announcement."""
    from dali_pipes.native.prebuild import prebuild

    built = []
    before = last_build_s()

    def relay(line: str) -> None:
        if line.startswith(BUILDING):
            built.append(line)
            took = "" if before is None else f"; the last build here took {before:.0f} s"
            line = f"{BUILDING} (one time{took}) ..."
        say(line)

    start = time.monotonic()
    failed = prebuild(say=relay)
    if built and not failed:  # a build of every operator: the next estimate
        with contextlib.suppress(OSError):  # a read-only cache: no estimate next time
            _record().parent.mkdir(parents=True, exist_ok=True)
            _record().write_text(json.dumps({"seconds": round(time.monotonic() - start, 1)}))
