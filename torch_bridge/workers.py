"""Starting and stopping DataLoader worker processes safely beside DALI pipelines."""
from __future__ import annotations

import gc

from torch.utils.data import DataLoader


def start_workers(loader: DataLoader):
    """`iter(loader)`, forking its workers (when it does) with the collector frozen.

    A forked worker inherits the parent's unreachable objects (DALI pipelines hold
    reference cycles); were it to collect a Pipeline, the destructor would join DALI
    threads that do not exist in the child and the worker would crash. Frozen objects are
    never collected in the child; the parent unfreezes them at once (gc.freeze is O(1)).
    """
    if loader.num_workers == 0:
        return iter(loader)
    gc.freeze()
    try:
        return iter(loader)
    finally:
        gc.unfreeze()


def stop_workers(loader: DataLoader | None) -> None:
    """Shut a DataLoader's (persistent) workers down now.

    Left to a garbage collection (an aborted pass held by a traceback), the workers'
    queues can be finalized before the iterator, and each worker then takes 5 s to time out.
    """
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    if loader is not None:
        loader._iterator = None
