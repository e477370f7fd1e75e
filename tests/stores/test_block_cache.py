"""The block cache: exact bytes across block edges, hits after misses, LRU eviction under
the byte limit, a new object version in other blocks."""
from __future__ import annotations

import os

import numpy as np
import pytest

from dali_pipes.stores.block_cache import DIGEST, BlockCache

BLOB = (np.arange(1000) * 7 % 256).astype(np.uint8)


def _fetcher(calls: list):
    def fetch(start: int, end: int) -> bytes:
        calls.append((start, end))
        return BLOB[start:end].tobytes()
    return fetch


def test_ranges_across_blocks_are_exact_and_cached(tmp_path):
    cache, calls = BlockCache(str(tmp_path), block_size=100), []
    got = cache.read("s3://b/x", 1, len(BLOB), 150, 300, _fetcher(calls))
    assert np.array_equal(got, BLOB[150:450]) and calls == [(100, 200), (200, 300),
                                                            (300, 400), (400, 500)]
    assert np.array_equal(cache.read("s3://b/x", 1, len(BLOB), 990, 10, _fetcher(calls)),
                          BLOB[990:])
    assert calls[-1] == (900, 1000)
    cache.read("s3://b/x", 1, len(BLOB), 120, 50, _fetcher(calls))
    assert len(calls) == 5 and cache.hits == 1
    cache.read("s3://b/x", 2, len(BLOB), 120, 50, _fetcher(calls))  # a new version
    assert len(calls) == 6


def test_least_recently_used_blocks_go_first_and_the_limit_holds(tmp_path):
    cache, calls = BlockCache(str(tmp_path), limit=300, block_size=100), []
    for block in (0, 1, 2):
        cache.read("u", 1, len(BLOB), block * 100, 10, _fetcher(calls))
    cache.read("u", 1, len(BLOB), 5, 1, _fetcher(calls))  # block 0 used again
    cache.read("u", 1, len(BLOB), 305, 1, _fetcher(calls))  # block 3: evicts block 1
    assert cache.size() <= 300
    n = len(calls)
    cache.read("u", 1, len(BLOB), 5, 1, _fetcher(calls))
    assert len(calls) == n  # block 0 stayed
    cache.read("u", 1, len(BLOB), 105, 1, _fetcher(calls))
    assert len(calls) == n + 1  # block 1 was evicted


def test_a_limit_below_one_block_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cache_limit=10"):
        BlockCache(str(tmp_path), limit=10, block_size=100)


def test_a_block_file_cut_short_is_fetched_again(tmp_path):
    cache, calls = BlockCache(str(tmp_path), block_size=100), []
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))
    (block,) = tmp_path.glob("*.blk")
    block.write_bytes(block.read_bytes()[:40])  # another process died mid-write, say
    got = cache.read("u", 1, len(BLOB), 30, 60, _fetcher(calls))
    assert np.array_equal(got, BLOB[30:90]) and len(calls) == 2
    assert len(block.read_bytes()) == 100 + DIGEST  # stored whole again
    assert np.array_equal(cache.read("u", 1, len(BLOB), 10, 20, _fetcher(calls)), BLOB[10:30])
    assert len(calls) == 2 and cache.hits == 1


def test_a_mapped_block_cut_short_in_place_is_fetched_again(tmp_path):
    """A block kept mapped is asked for its size before each read: cut short in place by
    another program, it is read again, never touched past its end (SIGBUS)."""
    cache, calls = BlockCache(str(tmp_path), block_size=100), []
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))  # a hit: mapped now
    (block,) = tmp_path.glob("*.blk")
    with open(block, "r+b") as f:
        f.truncate(10)
    assert np.array_equal(cache.read("u", 1, len(BLOB), 50, 50, _fetcher(calls)),
                          BLOB[50:100])
    assert len(calls) == 2 and len(block.read_bytes()) == 100 + DIGEST


def test_a_mapped_block_replaced_keeps_the_bytes_checked(tmp_path):
    cache, calls = BlockCache(str(tmp_path), block_size=100), []
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))  # mapped, checked
    (block,) = tmp_path.glob("*.blk")
    other = tmp_path / "other"
    other.write_bytes(bytes(100 + DIGEST))
    os.replace(other, block)
    assert np.array_equal(cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls)), BLOB[:100])
    with pytest.warns(RuntimeWarning, match="does not match its checksum"):  # a new process
        got = BlockCache(str(tmp_path), block_size=100).read("u", 1, len(BLOB), 0, 100,
                                                              _fetcher(calls))
    assert np.array_equal(got, BLOB[:100]) and len(calls) == 2


def test_more_blocks_than_maps_read_right_and_pieces_are_views(tmp_path):
    cache, calls = BlockCache(str(tmp_path), block_size=100, maps=2), []
    cache.read("u", 1, len(BLOB), 0, len(BLOB), _fetcher(calls))
    for start in (950, 10, 420, 10, 777, 0, 305):
        got = cache.read("u", 1, len(BLOB), start, 50, _fetcher(calls))
        assert np.array_equal(got, BLOB[start:start + 50]) and got.flags.writeable
    pieces = cache.pieces("u", 1, len(BLOB), 150, 200, _fetcher(calls))
    assert [at for at, _ in pieces] == [150, 200, 300]
    assert all(not p.flags.writeable and p.base is not None for _, p in pieces)
    assert np.array_equal(np.concatenate([p for _, p in pieces]), BLOB[150:350])
    assert len(calls) == 10  # each block fetched once
