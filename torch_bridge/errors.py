"""Per-sample failures: raised with context, or counted and named under on_error="skip"."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Literal, TypeVar

import numpy as np

T = TypeVar("T")
OnError = Literal["raise", "skip"]


class SampleError(RuntimeError):
    """A sample could not be read or decoded; the message names its file and index.

    Constructible from the message alone (index and path travel in its __dict__), so
    DataLoader workers and feed workers (torch_bridge.engines._feeders) re-raise it in the consumer
    process unchanged.
    """

    def __init__(self, message: str, *, index: int | None = None, path: str | None = None):
        super().__init__(message)
        self.index = index
        self.path = path


class WorkerDied(RuntimeError):
    """A feed worker process died (killed, out of memory, crashed in native code) while
    the engine waited on it; iterating again starts new workers."""


class SharedMemoryError(RuntimeError):
    """Worker processes could not hand a batch over through shared memory (/dev/shm full
    or too small); the message says how much is free and what to change."""


@dataclass(frozen=True)
class Skipped:
    """One sample left out of a batch under on_error="skip"."""

    index: int
    path: str
    epoch: int
    reason: str


def sample_error(index: int, path: str, exc: BaseException) -> SampleError:
    return SampleError(f"sample {index} ({path}): {type(exc).__name__}: {exc}",
                       index=index, path=path)


class SampleGuard:
    """Applies on_error to per-sample work and remembers samples known to be bad."""

    def __init__(self, on_error: OnError):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.on_error = on_error
        self.skipped: list[Skipped] = []
        self.known_bad: dict[int, str] = {}

    def record(self, skips: Iterable[Skipped]) -> None:
        """Add skip records made elsewhere (a prepared batch, a worker process)."""
        self.skipped.extend(skips)

    def collect_skips(self, work: Callable[[], T]) -> tuple[T, tuple[Skipped, ...]]:
        """`work()` and the skip records it made, taken out of this guard (they are
        recorded with `record` when their batch is consumed).

        Returns:
            (what `work` returned, its skip records in order)
        """
        mark = len(self.skipped)
        try:
            result = work()
            return result, tuple(self.skipped[mark:])
        finally:
            del self.skipped[mark:]

    def known_bad_for(self, indices) -> dict[int, str]:
        """The known-bad entries (index -> reason) of these indices."""
        bad = self.known_bad
        if not bad:
            return {}
        return {i: bad[i] for i in np.asarray(indices).tolist() if i in bad}

    def remember_bad(self, entries: Mapping[int, str]) -> None:
        """Learn samples found bad elsewhere (index -> reason): they are skipped without
        being read again."""
        self.known_bad.update(entries)

    def mark_bad(self, index: int, path: str, exc: BaseException) -> str:
        """Raise SampleError (on_error="raise") or remember the sample as bad."""
        if self.on_error == "raise":
            raise sample_error(index, path, exc) from exc
        reason = f"{type(exc).__name__}: {exc}"
        self.known_bad[index] = reason
        return reason

    def fail(self, index: int, path: str, epoch: int, exc: BaseException) -> None:
        """Raise SampleError (on_error="raise") or record the skip."""
        reason = self.mark_bad(index, path, exc)
        self.skipped.append(Skipped(int(index), path, epoch, reason))

    def read_batch(self, epoch: int, indices, path: Callable[[int], str],
                   read: Callable[..., T], keys=None) -> tuple[list[T], np.ndarray]:
        """`read(index)` (with `keys`: `read(index, key)`) for each sample of a batch; the
        results and the int64 positions in the batch of the samples that succeeded (an
        index may occur twice in a batch, with two augmentation keys)."""
        results, kept = [], []
        keys = [None] * len(indices) if keys is None else np.asarray(keys).tolist()
        for position, (index, key) in enumerate(zip(np.asarray(indices).tolist(), keys,
                                                    strict=True)):
            work = partial(read, index) if key is None else partial(read, index, key)
            got = self.run(index, path(index), epoch, work)
            if got is not None:
                results.append(got)
                kept.append(position)
        return results, np.asarray(kept, dtype=np.int64)

    def run(self, index: int, path: str, epoch: int, work: Callable[[], T]) -> T | None:
        """`work()`, or None when it failed and the sample is skipped."""
        reason = self.known_bad.get(index)
        if reason is not None:
            self.skipped.append(Skipped(int(index), path, epoch, reason))
            return None
        try:
            return work()
        except Exception as exc:  # any per-sample failure (a decoder's OverflowError,
            # Pillow's DecompressionBombError, ...); never KeyboardInterrupt or SystemExit
            self.fail(index, path, epoch, exc)
            return None
