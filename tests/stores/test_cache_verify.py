"""Cached blocks are verified: a block file of the right length holding other bytes (zero-filled
after a crash, a flipped bit, another program's write) is dropped and fetched again with one
warning naming it, never served; an object whose server sends neither ETag nor
Last-Modified is not cached, so a change to it is never hidden by old blocks."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from dali_pipes.stores.block_cache import BlockCache
from dali_pipes.stores.remote import FsspecStore
from tests.sources.shard_data import write_shards
from tests.stores.proxy import Proxy
from tests.stores.servers import RangeServer
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import assert_same, copies

BLOB = np.random.default_rng(7).integers(0, 256, 1000, dtype=np.uint8)


def _fetcher(calls: list):
    def fetch(start: int, end: int) -> bytes:
        calls.append((start, end))
        return BLOB[start:end].tobytes()
    return fetch


def _zeroed(data: bytes) -> bytes:
    return bytes(len(data))


def _bit_flipped(data: bytes) -> bytes:
    return data[:37] + bytes([data[37] ^ 0x10]) + data[38:]


def _foreign(data: bytes) -> bytes:  # another block's bytes, the same length
    return BLOB[500:500 + len(data)].tobytes()


@pytest.mark.parametrize("damage", [_zeroed, _bit_flipped, _foreign])
def test_a_damaged_block_is_dropped_and_fetched_again_with_one_warning(tmp_path, damage):
    calls: list = []
    BlockCache(str(tmp_path), block_size=100).read("s3://b/x", 1, len(BLOB), 0, 100,
                                                   _fetcher(calls))
    (block,) = tmp_path.glob("*.blk")
    data = block.read_bytes()
    with open(block, "r+b") as f:  # rewritten in place: same file, same length
        f.write(damage(data))
    cache = BlockCache(str(tmp_path), block_size=100)  # a later process
    with pytest.warns(RuntimeWarning) as caught:
        got = cache.read("s3://b/x", 1, len(BLOB), 20, 50, _fetcher(calls))
    assert np.array_equal(got, BLOB[20:70]) and calls == [(0, 100), (0, 100)]
    assert [str(w.message) for w in caught] == [
        f"{block}: cached block of s3://b/x (bytes 0..100) does not match its checksum "
        "(damaged on disk or written by another program); dropped and fetched again"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(cache.read("s3://b/x", 1, len(BLOB), 0, 100, _fetcher(calls)),
                              BLOB[:100])
        assert np.array_equal(BlockCache(str(tmp_path), block_size=100).read(
            "s3://b/x", 1, len(BLOB), 0, 100, _fetcher(calls)), BLOB[:100])
    assert len(calls) == 2  # stored again, good this time


def test_a_block_replaced_while_in_use_is_checked_again(tmp_path):
    cache, calls = BlockCache(str(tmp_path), block_size=100), []
    cache.read("u", 1, len(BLOB), 0, 100, _fetcher(calls))
    (block,) = tmp_path.glob("*.blk")
    other = tmp_path / "other"
    other.write_bytes(_zeroed(block.read_bytes()))
    os.replace(other, block)  # another program's file under the block's name
    with pytest.warns(RuntimeWarning, match="does not match its checksum"):
        got = cache.read("u", 1, len(BLOB), 10, 10, _fetcher(calls))
    assert np.array_equal(got, BLOB[10:20]) and len(calls) == 2


def test_an_object_without_validators_is_not_cached(tmp_path):
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "blob.bin").write_bytes(BLOB.tobytes())
    cache = str(tmp_path / "cache")
    with RangeServer(tmp_path / "srv") as server, Proxy(server.url) as proxy:
        proxy.drop = {"etag", "last-modified"}
        url = f"{proxy.url}/blob.bin"
        with pytest.warns(RuntimeWarning) as caught:
            first = FsspecStore(cache_dir=cache, block_size=256, retries=0)
            assert np.array_equal(first.read_range(url, 0, 300), BLOB[:300])
            assert np.array_equal(first.read_range(url, 600, 300), BLOB[600:900])
        assert [str(w.message) for w in caught] == [
            f"{url}: the server sends neither ETag nor Last-Modified for it, so a change to "
            "it could not be told from its cached blocks; it and every other such object are "
            "read without the block cache"]
        new = BLOB[::-1].copy()  # replaced, same size: nothing tells the two apart
        (tmp_path / "srv" / "blob.bin").write_bytes(new.tobytes())
        with pytest.warns(RuntimeWarning, match="without the block cache"):
            later = FsspecStore(cache_dir=cache, block_size=256, retries=0)
            assert np.array_equal(later.read_range(url, 0, 300), new[:300])
    assert not list((tmp_path / "cache").glob("*.blk"))


def test_shards_with_zeroed_cached_blocks_load_like_the_folder(image_folder, tmp_path):
    shards = write_shards(image_folder, tmp_path / "wds", per_shard=10)
    opts = {"backend": "torch", "reference": {"num_workers": 0}, "batch_size": 8,
            "size": 32, "seed": 1, "cache_dir": str(tmp_path / "cache")}
    want = copies(make_loader("image", image_folder, **{**opts, "cache_dir": None}))
    with RangeServer(shards) as server:
        url = f"{server.url}/train-{{000000..000003}}.tar"
        assert_same(copies(make_loader("image", url, **opts)), want)
        blocks = sorted((tmp_path / "cache").glob("*.blk"))
        for block in blocks:  # a crash lost the data the files' lengths promised
            block.write_bytes(bytes(block.stat().st_size))
        with pytest.warns(RuntimeWarning, match="does not match its checksum") as caught:
            assert_same(copies(make_loader("image", url, **opts)), want)
    damaged = [str(w.message).split(":")[0] for w in caught if "checksum" in str(w.message)]
    assert sorted(damaged) == [str(b) for b in blocks]
