"""Every remote request is bounded as a whole: an answer trickled a byte at a time (each byte
well inside botocore's per-read timeout) is stopped at the store's timeout, on S3 (moto behind
a trickling proxy) and HTTP, for reads, stats and listings; it is retried as other transient
failures are, and the error names the object and the time spent."""
from __future__ import annotations

import functools
import re
import uuid

import numpy as np
import pytest

from dali_pipes.stores.remote import FsspecStore, StoreError
from tests.sources.shard_data import write_shards
from tests.stores.proxy import Proxy, moto_fixture, put, served_fixture, through
from torch_bridge import SampleError, make_loader

BLOB = np.random.default_rng(5).integers(0, 256, 3000, dtype=np.uint8)
TRICKLE = (0.1, 60)  # 6 s for 60 bytes: past a 1-2 s timeout, no socket read waits 1 s
TIMED_OUT = (r"RequestTimeout: no complete answer after \d+\.\d s \(the store's timeout, "
             r"\d s, bounds connection, headers and body together\)")


moto = moto_fixture()
served = served_fixture(BLOB)


def _store(options: dict, **kw) -> FsspecStore:
    return FsspecStore(**{"retries": 0, "backoff": 0.01, "timeout": 1.0, **options, **kw})


def test_a_trickled_body_is_stopped_and_retried(served):
    options, url, proxy = served
    store = _store(options, retries=1)
    store.stat(url)
    proxy.trickle = TRICKLE
    with pytest.raises(StoreError, match=re.escape(url) + r": read of bytes 0\.\.100 failed "
                                         "after 2 attempts: " + TIMED_OUT):
        store.read_range(url, 0, 100)
    proxy.trickle = None  # the connection the timed-out read held is not in the way
    assert np.array_equal(store.read_range(url, 100, 100), BLOB[100:200])


def test_a_trickled_answer_to_a_stat_is_stopped(served):
    options, url, proxy = served
    proxy.trickle, proxy.trickle_head = TRICKLE, True  # the status line and headers too
    with pytest.raises(StoreError, match=re.escape(url) + r": stat failed after 1 attempt: "
                                         + TIMED_OUT):
        _store(options).stat(url)


def test_a_trickled_listing_is_stopped(moto, tmp_path):
    (tmp_path / "blob.bin").write_bytes(BLOB.tobytes())
    url = put(moto, tmp_path / "blob.bin", f"bounds-{uuid.uuid4().hex[:12]}")
    folder = url.rsplit("/", 1)[0] + "/"
    with Proxy(moto.endpoint) as proxy:
        store = _store({"storage_options": through(moto, proxy)})
        proxy.trickle = TRICKLE
        with pytest.raises(StoreError, match=re.escape(folder) + r": list failed after 1 "
                                             "attempt: " + TIMED_OUT):
            store.list(folder)
        proxy.trickle = None
        assert [u for u, _, _ in store.list(folder)] == [url]


def test_s3_shards_trickled_after_the_listing_fail_naming_the_shard(
        image_folder, tmp_path, moto, monkeypatch):
    import dali_pipes.stores.select as select
    shards = write_shards(image_folder, tmp_path / "wds", per_shard=10)
    url = moto.upload(shards, f"bounds-{uuid.uuid4().hex[:12]}", "train")
    # the loader's own store, with a 2 s timeout and no retries (make_loader's default: 30 s)
    monkeypatch.setattr(select, "FsspecStore", functools.partial(FsspecStore, timeout=2.0,
                                                                 retries=0))
    with Proxy(moto.endpoint) as proxy:
        loader = make_loader("image", url, storage_options=through(moto, proxy),
                             backend="torch", reference={"num_workers": 0}, batch_size=2,
                             size=32, shuffle=False)
        proxy.trickle = TRICKLE
        with pytest.raises(SampleError, match=r"sample 0 \(" + re.escape(url) +
                           r"train-000000\.tar:sample000000\.jpg\).*failed after 1 attempt: "
                           + TIMED_OUT):
            next(iter(loader))
