"""Read-ahead: after a miss, the next blocks of the object come in one request in the
background, never asked for twice; requests in flight are bounded per process; an answer
fetched ahead is checked as every answer is (a short one is never cached nor served, the
read fetches the block itself); a forked process reads ahead with threads of its own."""
from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.stores.mapped_blocks import DIGEST
from dali_pipes.stores.remote import FsspecStore
from tests.stores.servers import served_file

BLOCK = 1000
BLOB = np.random.default_rng(11).integers(0, 256, 20 * BLOCK, dtype=np.uint8)


@pytest.fixture
def served(tmp_path):
    with served_file(tmp_path / "srv", "blob.bin", BLOB.tobytes()) as found:
        yield found


def _store(tmp_path: Path, **kw) -> FsspecStore:
    return FsspecStore(cache_dir=str(tmp_path / "cache"), block_size=BLOCK, retries=0,
                       timeout=10.0, **kw)


def _read(store: FsspecStore, url: str, block: int) -> None:
    at = block * BLOCK + 17
    np.testing.assert_array_equal(store.read_range(url, at, 100), BLOB[at:at + 100])


def test_the_next_blocks_come_ahead_in_one_request(served, tmp_path):
    server, url = served
    store = _store(tmp_path, read_ahead=4)
    store.cache.ahead.merge = 4  # up to 4 blocks a request
    store.stat(url)
    for block in range(20):  # 0 read, 1-4 ahead; the first use of 4: 5-8 ahead, ...
        _read(store, url, block)
    assert server.requests["blob.bin"] == 1 + 1 + 5  # the stat, block 0, 5 runs ahead
    cached = {int(p.stem.rsplit("-", 1)[1]) for p in (tmp_path / "cache").glob("*.blk")}
    assert cached == set(range(20))
    assert store.cache.misses <= 6  # a read waiting for a block on its way misses it


def test_requests_in_flight_are_bounded(served, tmp_path):
    server, url = served
    store = _store(tmp_path, read_ahead=8)
    store.cache.ahead.depth, store.cache.ahead.merge = 2, 1  # one block a request
    store.stat(url)
    server.faults["blob.bin"] += [("sleep", 0.05)] * 40
    for block in range(0, 20, 3):
        _read(store, url, block)
    for block in range(20):
        _read(store, url, block)
    assert 1 <= server.most_in_flight <= 2 + 1  # read-ahead's and the read's own


@pytest.mark.parametrize("fault", [503, ("short", 10)])
def test_a_failed_request_ahead_is_fetched_by_the_read(served, tmp_path, fault):
    server, url = served
    store = _store(tmp_path, read_ahead=2)
    store.stat(url)
    server.faults["blob.bin"] += [("sleep", 0), fault]  # the read's request, then ahead's
    _read(store, url, 0)
    _read(store, url, 1)
    _read(store, url, 2)
    assert server.requests["blob.bin"] == 1 + 2 + 2  # 1 and 2 fetched again, ahead of 1
    for path in (tmp_path / "cache").glob("*.blk"):  # nothing wrong was cached
        block = int(path.stem.rsplit("-", 1)[1])
        assert path.read_bytes()[:-DIGEST] == BLOB[block * BLOCK:(block + 1) * BLOCK].tobytes()


def _child(store: FsspecStore, url: str, out) -> None:
    try:
        for block in (12, 13, 14, 19):
            _read(store, url, block)
        out.put("ok")
    except BaseException as exc:  # noqa: BLE001  reported to the parent
        out.put(repr(exc))


def test_a_forked_process_reads_ahead_with_its_own_threads(served, tmp_path):
    server, url = served
    store = _store(tmp_path, read_ahead=4)
    _read(store, url, 0)  # the parent's read-ahead threads run
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child, args=(store, url, out))
    child.start()
    child.join(60)
    assert not child.is_alive() and out.get(timeout=5) == "ok"
    assert (tmp_path / "cache").glob("*-13.blk")
