"""A closed ProcessPool says so when a result is asked of it (not an AttributeError)."""
from __future__ import annotations

import pytest

from torch_bridge.engines._feed_pool import ProcessPool


def _init(results) -> None:
    """Worker start-up: nothing to prepare."""


def _double(task: int) -> int:
    return 2 * task


def test_result_after_close_names_the_closed_pool():
    pool = ProcessPool(_double, (_init,), 1, method="fork")
    try:
        assert pool.result(pool.submit(21)) == 42
        pending = pool.submit(1)
    finally:
        pool.close()
    with pytest.raises(RuntimeError, match="ProcessPool is closed"):
        pool.result(pending)
