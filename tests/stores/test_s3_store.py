"""Shards in S3 (moto's standalone server on 127.0.0.1): the same batches as the folder on
both backends, a warm cache that serves a pass after the server died, and a server that dies
mid-epoch with a cold cache: an error naming the URL after bounded retries, never a hang."""
from __future__ import annotations

import re

import pytest

from dali_pipes.sources.protocol import STORED
from tests.sources.shard_data import write_shards
from tests.stores.servers import MotoS3
from torch_bridge import SampleError, make_loader
from torch_bridge.testing.loader_contract import assert_same, copies


@pytest.fixture(scope="module")
def local_shards(image_folder, tmp_path_factory):
    return write_shards(image_folder, tmp_path_factory.mktemp("wds"), per_shard=10)


def _opts(backend, **kw):
    opts = {"backend": backend, "batch_size": 8, "size": 32, "seed": 4, **kw}
    if backend == "torch":
        opts["reference"] = {"num_workers": 0}
    return opts


def test_s3_shards_load_like_the_folder(image_folder, local_shards, tmp_path, backend):
    with MotoS3() as s3:
        url = s3.upload(local_shards, "data", "train")
        opts = _opts(backend, storage_options=s3.options)
        folder = copies(make_loader("image", image_folder, **_opts(backend)))
        assert_same(copies(make_loader("image", url, **opts)), folder)  # no cache
        cached = make_loader("image", url, cache_dir=str(tmp_path / "c"),
                             cache_limit=64 << 20, **opts)
        assert_same(copies(cached), folder)
        warm = make_loader("image", url, cache_dir=str(tmp_path / "c"), **opts)
    # The server is gone: the warm cache serves every read of the listing made before.
    assert_same(copies(warm), folder)


def test_server_dying_mid_epoch_names_the_url(local_shards):
    from dali_pipes.sources.shards import ShardSource
    from dali_pipes.stores.remote import FsspecStore, StoreError
    with MotoS3() as s3:
        url = s3.upload(local_shards, "data", "train")
        source = ShardSource(url, store=FsspecStore(storage_options=s3.options, retries=1,
                                                    backoff=0.01, timeout=5.0))
        assert source.read(0, STORED).data.size > 0
        loader = make_loader("image", url + "train-000001.tar", storage_options=s3.options,
                             batch_size=8, size=32, shuffle=False)
    with pytest.raises(StoreError, match=re.escape(url) + r"train-000000\.tar: read of bytes "
                       r".* failed after 1 attempt: EndpointConnectionError"):
        source.read(1, STORED)
    with pytest.raises(SampleError, match=r"sample 0 \(" + re.escape(url) +
                       r"train-000001\.tar:sample000010\.jpg\).*failed after 1 attempt"):
        next(iter(loader))


def test_remote_options_on_local_data_are_refused(image_folder, local_shards):
    for data in (image_folder, local_shards):
        with pytest.raises(ValueError, match="apply to"):
            make_loader("image", data, cache_dir="/tmp/x")
