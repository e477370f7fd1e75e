"""Remote objects replaced after the listing (same names, same size, other bytes): every
read checks the version recorded at listing (S3 on moto, an HTTP server with or without
ETag), a changed object is a per-sample error naming it (a skip under on_error="skip"),
and caches keyed by version never serve the old bytes to a new listing."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.sources.protocol import STORED
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.remote import FsspecStore, ObjectChanged, StoreError
from dali_pipes.stores.tar_index import load_index
from tests.sources.shard_data import write_shards
from tests.stores.servers import MotoS3, RangeServer, free_port
from torch_bridge import make_loader


def _payloads(seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, 3000, dtype=np.uint8).tobytes() for _ in range(3)]


def _write(path: Path, seed: int) -> list[bytes]:
    """A shard of three samples whose members keep their names and sizes for any seed."""
    import webdataset as wds
    payloads = _payloads(seed)
    with wds.TarWriter(str(path)) as writer:
        for i, data in enumerate(payloads):
            writer.write({"__key__": f"k{i}", "jpg": data, "cls": i})
    return payloads


def _replace(path: Path, seed: int) -> list[bytes]:
    """Rewrite `path` in place with other bytes of the same size, a newer mtime."""
    before = path.stat()
    payloads = _write(path, seed)
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_mtime_ns + 10**10,) * 2)  # Last-Modified: 1 s resolution
    return payloads


def _store(**kw) -> FsspecStore:
    return FsspecStore(**{"retries": 1, "backoff": 0.01, "timeout": 5.0, **kw})


@pytest.mark.parametrize("etag", [True, False])
def test_http_object_replaced_after_listing(tmp_path, etag):
    (tmp_path / "srv").mkdir()
    shard = tmp_path / "srv" / "a.tar"
    old = _write(shard, 1)
    cache = str(tmp_path / "cache")
    with RangeServer(tmp_path / "srv", etag=etag) as server:
        url = f"{server.url}/a.tar"
        listed = ShardSource(url, store=_store(cache_dir=cache),
                             index_dir=str(tmp_path / "idx"))
        assert listed.read(0, STORED).data.tobytes() == old[0]  # block 0 is cached now
        uncached = ShardSource(url, store=_store(), index_dir=str(tmp_path / "idx"))
        new = _replace(shard, 2)
        with pytest.raises(ObjectChanged, match=re.escape(url) + ": the object changed "
                                                               "since it was listed"):
            uncached.read(1, STORED)
        # A new listing: the new version's index and blocks, never the old ones.
        again = ShardSource(url, store=_store(cache_dir=cache), index_dir=str(tmp_path / "idx"))
        assert [again.read(i, STORED).data.tobytes() for i in range(3)] == new


def test_s3_object_replaced_after_listing(tmp_path):
    (tmp_path / "up").mkdir()
    old = _write(tmp_path / "up" / "a.tar", 1)
    with MotoS3() as s3:
        url = s3.upload(tmp_path / "up", "replaced-object", "v") + "a.tar"
        source = ShardSource(url, store=_store(storage_options=s3.options),
                             index_dir=str(tmp_path / "idx"))
        assert source.read(0, STORED).data.tobytes() == old[0]
        new = _replace(tmp_path / "up" / "a.tar", 2)
        s3.upload(tmp_path / "up", "replaced-object", "v")
        with pytest.raises(ObjectChanged, match=re.escape(url) + ": the object changed"):
            source.read(1, STORED)
        with pytest.raises(ObjectChanged):
            source.store.read_range(url, 0, 10, source.store.stat(url))
        again = ShardSource(url, store=_store(storage_options=s3.options),
                            index_dir=str(tmp_path / "idx"))
        assert again.read(1, STORED).data.tobytes() == new[1]


def test_a_replaced_s3_shard_is_skipped_by_name(image_folder, tmp_path, backend):
    shards = write_shards(image_folder, tmp_path / "wds", per_shard=10)
    first = shards / "train-000000.tar"
    opts = {"backend": backend, "batch_size": 8, "size": 32, "shuffle": False,
            "on_error": "skip"}
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    with MotoS3() as s3:
        url = s3.upload(shards, "replaced-shard", "train")
        loader = make_loader("image", url, storage_options=s3.options, **opts)
        data = bytearray(first.read_bytes())
        at = int(load_index(str(first)).offsets[0]) + 200  # inside an image, same size
        data[at] ^= 0xFF
        first.write_bytes(bytes(data))
        s3.upload(shards, "replaced-shard", "train")
        seen = sum(len(b["label"]) for b in loader)
    assert len(loader.skipped) == 10 and seen == len(ShardSource(shards)) - 10
    assert all("train-000000.tar" in s.path and "changed since it was listed" in s.reason
               for s in loader.skipped)


def test_a_dead_endpoint_and_a_missing_bucket_fail_at_once(tmp_path):
    dead = {"key": "k", "secret": "s", "client_kwargs": {
        "endpoint_url": f"http://127.0.0.1:{free_port()}", "region_name": "us-east-1"}}
    store = _store(storage_options=dead, retries=2, backoff=1.0)  # retried: "after 3 attempts"
    for call in (lambda: store.stat("s3://b/x.tar"), lambda: store.read_range(
            "s3://b/x.tar", 0, 10), lambda: store.list("s3://b/f/")):
        with pytest.raises(StoreError, match=r"s3://b/.* failed after 1 attempt: "
                                             "EndpointConnectionError"):
            call()
    with MotoS3() as s3:
        store = _store(storage_options=s3.options, retries=2, backoff=1.0)
        for call in (lambda: store.stat("s3://nobucket/x.tar"),
                     lambda: store.read_range("s3://nobucket/x.tar", 0, 10, (10, 1)),
                     lambda: store.list("s3://nobucket/f/")):
            with pytest.raises(StoreError, match=r"s3://nobucket/.* failed \(status 404\) "
                                                 r"after 1 attempt: .*NoSuchBucket"):
                call()


def test_store_errors_cross_process_boundaries():
    import pickle
    for err in (ObjectChanged("s3://b/x.tar", 5, '"abc"'),
                StoreError("s3://b/x.tar", "read", FileNotFoundError("gone"), 1)):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert (back.url, back.status) == (err.url, err.status)
