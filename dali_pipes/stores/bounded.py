"""Remote calls bounded as a whole: connection, headers and body within one timeout.

A client's own timeouts bound each step, not the request: botocore's `read_timeout` bounds
each socket read, so an S3 answer trickled a byte at a time never trips it and a 4 MiB block
can take hours. fsspec's asynchronous file systems (s3fs, its HTTP file system, gcsfs, ...)
run every call as a coroutine on the file system's event loop; `run_bounded` runs one there
under a deadline, and a call past it is cancelled (the response it held is closed with it)
and raises `RequestTimeout` saying how long it ran. `BoundedFileSystem` wraps a file system
so that its stat and listing calls (`info`, `find`, `glob`) and `cat_file` are bounded the
same way; file systems without an event loop (local files, `memory://`) are called as they
are.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

_LATE = object()
_CANCELS = 20


class RequestTimeout(TimeoutError):
    """A remote request that did not finish within the store's timeout."""


def run_bounded(fs, timeout: float, func, *args, **kwargs) -> Any:
    """`await func(*args, **kwargs)` on `fs`'s event loop, whole within `timeout` seconds
    (RequestTimeout, naming the time spent, past it)."""
    from fsspec.asyn import sync
    begun = time.monotonic()
    # The deadline's miss comes back as a value: fsspec's `sync` turns every TimeoutError
    # raised on its loop into a bare FSTimeoutError, which would lose the message.
    result = sync(fs.loop, _within, timeout, func, args, kwargs)
    if result is _LATE:
        raise RequestTimeout(f"no complete answer after {time.monotonic() - begun:.1f} s "
                             f"(the store's timeout, {timeout:g} s, bounds connection, "
                             "headers and body together)")
    return result


async def _within(timeout: float, func, args: tuple, kwargs: dict) -> Any:
    task = asyncio.ensure_future(func(*args, **kwargs))
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if done:
        return task.result()
    # Cancelled, its `finally` blocks close what it held. A cancellation can be taken for
    # the client's own timeout firing at the same moment (aiohttp's) and swallowed, so it
    # is repeated; a task that outlives every one is left to finish on its own.
    for _ in range(_CANCELS):
        task.cancel()
        if (await asyncio.wait({task}, timeout=0.05))[0]:
            break
    task.add_done_callback(_retrieved)
    return _LATE


def _retrieved(task: asyncio.Task) -> None:
    """Take a finished task's outcome (else asyncio logs "exception never retrieved")."""
    if not task.cancelled():
        task.exception()


class BoundedFileSystem:
    """An fsspec file system whose stat, listing and `cat_file` calls each finish within
    `timeout` seconds; every other attribute is the file system's own."""

    def __init__(self, fs, timeout: float):
        self.fs, self.timeout = fs, timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)

    def run(self, func, *args, **kwargs) -> Any:
        """`await func(*args, **kwargs)` on the file system's loop, bounded (see module)."""
        return run_bounded(self.fs, self.timeout, func, *args, **kwargs)

    def _bounded(self, name: str, *args, **kwargs) -> Any:
        if not getattr(self.fs, "async_impl", False):
            return getattr(self.fs, name)(*args, **kwargs)
        return self.run(getattr(self.fs, "_" + name), *args, **kwargs)

    def info(self, path: str, **kwargs) -> dict:
        return self._bounded("info", path, **kwargs)

    def find(self, path: str, **kwargs) -> Any:
        return self._bounded("find", path, **kwargs)

    def glob(self, path: str, **kwargs) -> Any:
        return self._bounded("glob", path, **kwargs)

    def cat_file(self, path: str, **kwargs) -> bytes:
        return self._bounded("cat_file", path, **kwargs)
