"""`py_num_workers = "auto"`: feed workers only where they pay, sized to this rank's cores.

Feed workers (torch_bridge.engines._feeders) pay when a modality's Python side is heavy: clips whose
codec DALI cannot decode on the chosen device go through the PyAV fallback in `feeds()`
(H.264, HEVC, AV1, MPEG-4 on the CPU backend; on a GPU whatever NVDEC is not routed). They
cost where the feed is light: VP8/VP9/MJPEG that DALI decodes itself, memory-mapped
hyperspectral cubes, JPEG files and frame folders (measured in default.toml's comment).
`resolve_workers` is the pure rule; `auto_workers` gathers its inputs.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from dali_pipes import launch_env

if TYPE_CHECKING:
    from dali_pipes.pipelines.config import DaliDevice

MAX_AUTO_WORKERS = 8  # beyond this the consumer, not the feed, limits clips/s
PROBED_FILES = 8  # files probed (spread over the listing) to learn the data's codecs


def resolve_workers(setting: int | str, *, fallback_codecs: Iterable[str],
                    rank_cores: int) -> int:
    """The number of feed worker processes for a `py_num_workers` setting.

    Args:
        setting: an int (used as it is) or "auto".
        fallback_codecs: codecs of the data that go through the PyAV fallback on the
            chosen device (empty when DALI decodes everything, or the data is not video).
        rank_cores: CPU cores this rank may use (`rank_cores()`).

    Returns:
        `setting` when it is an int; for "auto": 0 without fallback codecs or with fewer
        than 2 cores, else one worker per core, at most MAX_AUTO_WORKERS.
    """
    if setting != "auto":
        return int(setting)
    if not set(fallback_codecs) or rank_cores < 2:
        return 0
    return min(rank_cores, MAX_AUTO_WORKERS)


def rank_cores(*, affinity: int | None = None, cpu_count: int | None = None,
               local_world_size: int | None = None) -> int:
    """CPU cores left to this rank (arguments default to this process's view).

    A process pinned to fewer cores than the machine has keeps its affinity set (the
    launcher already split the cores); an unpinned one shares the machine with the
    LOCAL_WORLD_SIZE ranks of its node.

    Args:
        affinity: cores in this process's affinity mask (os.sched_getaffinity).
        cpu_count: cores of the machine (os.cpu_count).
        local_world_size: ranks on this node (env LOCAL_WORLD_SIZE, default 1).

    Returns:
        At least 1.
    """
    if cpu_count is None:
        cpu_count = os.cpu_count() or 1
    if affinity is None:
        try:
            affinity = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            affinity = cpu_count
    if local_world_size is None:
        local_world_size = launch_env.local_world_size()
    if affinity < cpu_count or local_world_size <= 1:
        return max(1, affinity)
    return max(1, affinity // local_world_size)


def data_codecs(source, *, limit: int = PROBED_FILES) -> set[str]:
    """Codec names of up to `limit` files spread over a video source's listing.

    Sources without per-file video probes (images, frame folders, cubes) give an empty
    set. A file that fails to probe is left out here only: the loader reports it under
    `on_error` when its sample is read.
    """
    info = getattr(source, "info", None)
    files = getattr(source, "files", ())
    if info is None or not len(files):
        return set()
    per_file = max(1, len(source) // len(files))
    picks = sorted({int(i) for i in _spread(len(files), limit)})
    codecs = set()
    for f in picks:
        try:
            codecs.add(info(f * per_file).codec)
        except (OSError, ValueError):  # FormatError is a ValueError
            continue
    return codecs


def _spread(n: int, k: int) -> list[int]:
    if n <= k:
        return list(range(n))
    return [round(i * (n - 1) / (k - 1)) for i in range(k)]


def auto_workers(setting: int | str, modality, dali_device: DaliDevice) -> int:
    """`resolve_workers` for a modality's data on DALI device "cpu" or "gpu"."""
    if setting != "auto":
        return int(setting)
    from dali_pipes.pipelines.video import dali_decodes

    codecs = data_codecs(getattr(modality, "source", None))
    fallback = {c for c in codecs if not dali_decodes(c, dali_device)}
    return resolve_workers(setting, fallback_codecs=fallback, rank_cores=rank_cores())


def start_feed_pool(make_pool: Callable[[int], object], setting: int | str, workers: int):
    """`make_pool(workers)`; for "auto", a pool that cannot start (an unpicklable modality
    under forkserver once CUDA is initialised, a script without a `__main__` guard) warns
    and returns None, so the feeds are prepared in this process as with 0 workers.

    Args:
        make_pool: starts the pool (torch_bridge.engines._feeders.FeedPool), RuntimeError if not.
        setting: the preset's py_num_workers.
        workers: the resolved count (> 0).

    Returns:
        The pool, or None ("auto" only; an explicit count re-raises).
    """
    try:
        return make_pool(workers)
    except RuntimeError as exc:
        if setting != "auto":
            raise
        warnings.warn(f'py_num_workers="auto" chose {workers} feed workers, which could not '
                      f"start; preparing the feeds in this process instead (set "
                      f"py_num_workers=0 to silence this): {exc}", RuntimeWarning,
                      stacklevel=3)
        return None
