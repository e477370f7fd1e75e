"""A range answer is the range asked for: a server, proxy or CDN answering other bytes (with
an honest Content-Range), a 206 without Content-Range, an object of another size than listed,
or a 200 whose body is not the listed object is an error naming the URL and both ranges, on
HTTP and S3 (moto), with and without the block cache; a server that sends no
Content-Length is sized by a ranged GET, or named when it gives no size at all."""
from __future__ import annotations

import os
import pickle
import re

import numpy as np
import pytest

from dali_pipes.stores.remote import FsspecStore, StoreError
from dali_pipes.stores.remote_read import RangeMismatch
from tests.sources.shard_data import write_shards
from tests.stores.proxy import Proxy, moto_fixture, served_fixture
from tests.stores.servers import RangeServer
from torch_bridge import make_loader

BLOB = np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)
ASKED = r": bytes \d+\.\.\d+ requested of an object listed with 5000 bytes; "


moto = moto_fixture()
served = served_fixture(BLOB)


def _store(options: dict, **kw) -> FsspecStore:
    return FsspecStore(**{"retries": 2, "backoff": 0.01, "timeout": 5.0, **options, **kw})


@pytest.mark.parametrize("cache", [False, True])
def test_another_range_is_an_error_naming_both_ranges(served, tmp_path, cache):
    options, url, proxy = served
    if cache:
        options = {**options, "cache_dir": str(tmp_path / "cache"), "block_size": 1024}
    store = _store(options, read_ahead=0)  # every block asked for when read (read-ahead:
    assert np.array_equal(store.read_range(url, 1000, 100), BLOB[1000:1100])  # test_read_ahead)
    proxy.shift = 512  # the answer: bytes 512 further on, honestly labelled
    with pytest.raises(RangeMismatch, match=re.escape(url) + ASKED + r"the server answered "
                       r"bytes \d+\.\.\d+ of 5000 \(Content-Range: bytes \d+-\d+/5000\)"):
        store.read_range(url, 3000, 100)
    proxy.shift = 0
    assert np.array_equal(store.read_range(url, 3000, 100), BLOB[3000:3100])


def test_a_206_without_content_range_is_an_error(served):
    options, url, proxy = served
    store = _store(options)
    store.stat(url)
    proxy.drop = {"content-range"}
    with pytest.raises(RangeMismatch, match=re.escape(url) + ASKED + r"the server answered "
                       r"206 \(partial content\) without a Content-Range"):
        store.read_range(url, 1000, 100)


def _grow_keeping_mtime(path, data: bytes) -> None:
    """Rewrite `path` with `data`, its modification time (Last-Modified) kept."""
    before = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_an_object_of_another_size_than_listed_is_an_error(tmp_path):
    (tmp_path / "blob.bin").write_bytes(BLOB.tobytes())
    with RangeServer(tmp_path, etag=False) as server:  # Last-Modified only: 1 s resolution
        url = f"{server.url}/blob.bin"
        store = _store({})
        store.stat(url)
        _grow_keeping_mtime(tmp_path / "blob.bin", BLOB.tobytes() * 2)
        with pytest.raises(RangeMismatch, match=re.escape(url) + ASKED + "the server "
                           r"answered bytes 1000\.\.1100 of 10000"):
            store.read_range(url, 1000, 100)


def test_a_whole_answer_that_is_not_the_listed_object_is_an_error(tmp_path):
    (tmp_path / "blob.bin").write_bytes(BLOB.tobytes())
    with RangeServer(tmp_path, etag=False) as server, Proxy(server.url) as proxy:
        url = f"{proxy.url}/blob.bin"
        store = _store({})
        store.stat(url)
        proxy.ignore_range = True  # 200 and the whole object, now 100 bytes: the range's size
        _grow_keeping_mtime(tmp_path / "blob.bin", BLOB[:100].tobytes())
        with pytest.raises(RangeMismatch, match=re.escape(url) + r": bytes 1000\.\.1100 "
                           r"requested; the answer is the whole object \(200\) of 5000 bytes, "
                           "but its body holds 100 bytes"):
            store.read_range(url, 1000, 100)


def test_a_server_without_content_length_is_sized_by_a_ranged_get(tmp_path):
    (tmp_path / "blob.bin").write_bytes(BLOB.tobytes())
    with RangeServer(tmp_path) as server, Proxy(server.url) as proxy:
        url = f"{proxy.url}/blob.bin"
        proxy.chunked = True  # every answer chunked: no Content-Length
        store = _store({})
        assert store.stat(url)[0] == 5000
        assert np.array_equal(store.read_range(url, 4000, 1000), BLOB[4000:])
        proxy.ignore_range = True  # and no Content-Range either: no size anywhere
        with pytest.raises(StoreError, match=re.escape(url) + r": stat failed after 1 "
                           "attempt: ValueError: the server sends no size for it"):
            _store({}).stat(url)


def test_range_mismatches_cross_process_boundaries():
    err = RangeMismatch("s3://b/x.tar", "bytes 0..10 requested; the server answered 5..15")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is RangeMismatch and str(back) == str(err) and back.url == err.url


def test_shards_behind_a_proxy_answering_other_ranges_skip_every_sample(
        image_folder, tmp_path, backend):
    shards = write_shards(image_folder, tmp_path / "wds", per_shard=10)
    opts = {"backend": backend, "batch_size": 8, "size": 32, "shuffle": False,
            "on_error": "skip"}
    if backend == "torch":
        opts["reference"] = {"num_workers": 1}
    with RangeServer(shards) as server, Proxy(server.url) as proxy:
        loader = make_loader("image", f"{proxy.url}/train-{{000000..000003}}.tar", **opts)
        proxy.shift = 512  # after the listing: every sample read gets the next 512 bytes
        assert sum(len(b["label"]) for b in loader) == 0
    assert len(loader.skipped) == 37
    assert all(s.reason.startswith("RangeMismatch: " + proxy.url) and
               "the server answered bytes" in s.reason for s in loader.skipped)
