"""The local store: exact byte ranges, a short file named in an EOFError, and a FIFO put
where a shard was fails at once instead of blocking."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from dali_pipes.stores.local import LocalStore

BLOB = (np.arange(5000) * 13 % 256).astype(np.uint8)


def test_ranges_are_exact(tmp_path):
    path = tmp_path / "a.tar"
    path.write_bytes(BLOB.tobytes())
    store = LocalStore()
    for offset, size in ((0, 1), (0, 5000), (4095, 2), (1234, 3000), (4999, 1)):
        got = store.read_range(str(path), offset, size)
        assert got.dtype == np.uint8 and np.array_equal(got, BLOB[offset:offset + size])
    assert store.stat(str(path))[0] == 5000


def test_a_range_past_the_end_names_the_file(tmp_path):
    path = tmp_path / "short.tar"
    path.write_bytes(BLOB[:100].tobytes())
    with pytest.raises(EOFError, match=r"short\.tar: bytes 50\.\.250 requested.*after 100"):
        LocalStore().read_range(str(path), 50, 200)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_fails_instead_of_blocking(tmp_path):
    path = tmp_path / "shard.tar"
    os.mkfifo(path)
    outcome: list[BaseException | None] = []

    def read():
        try:
            LocalStore().read_range(str(path), 0, 10)
            outcome.append(None)
        except (OSError, EOFError) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "read_range blocked on a FIFO"
    assert outcome and outcome[0] is not None
