"""FsspecStore over a local HTTP server: range reads, retries with backoff on transient
failures, no retries on 403/404, timeouts, and shards loading the same as a folder."""
from __future__ import annotations

import re

import numpy as np
import pytest

from dali_pipes.stores.remote import FsspecStore, StoreError
from tests.sources.shard_data import write_shards
from tests.stores.servers import RangeServer
from torch_bridge.testing.loader_contract import assert_same, copies


@pytest.fixture
def served(tmp_path):
    blob = (np.arange(5000) % 251).astype(np.uint8)
    (tmp_path / "blob.bin").write_bytes(blob.tobytes())
    with RangeServer(tmp_path) as server:
        yield server, blob


def _store(**kw) -> FsspecStore:
    return FsspecStore(**{"backoff": 0.01, "timeout": 5.0, **kw})


def _listed(server, **kw) -> FsspecStore:
    """A store that has taken the object's size and version (as a listing does)."""
    store = _store(**kw)
    store.stat(f"{server.url}/blob.bin")
    server.requests.clear()
    return store


def test_byte_ranges_and_stat(served):
    server, blob = served
    store = _store()
    url = f"{server.url}/blob.bin"
    assert store.stat(url)[0] == 5000
    assert np.array_equal(store.read_range(url, 1234, 100), blob[1234:1334])
    with pytest.raises(EOFError, match=re.escape(url)):
        store.read_range(url, 4990, 20)


def test_transient_failures_are_retried_then_succeed(served):
    server, blob = served
    store = _listed(server, retries=2)
    server.faults["blob.bin"] += [503, 500]
    assert np.array_equal(store.read_range(f"{server.url}/blob.bin", 0, 10), blob[:10])
    assert server.requests["blob.bin"] == 3


def test_lasting_failure_raises_naming_url_status_and_attempts(served):
    server, _ = served
    store = _listed(server, retries=2)
    server.faults["blob.bin"] += [500] * 5
    url = f"{server.url}/blob.bin"
    with pytest.raises(StoreError, match=rf"{re.escape(url)}: read of bytes 0\.\.10 failed "
                                         r"\(status 500\) after 3 attempts") as info:
        store.read_range(url, 0, 10)
    assert info.value.status == 500 and server.requests["blob.bin"] == 3


@pytest.mark.parametrize("status", [403, 404])
def test_refusals_are_not_retried(served, status):
    server, _ = served
    store = _listed(server, retries=3)
    server.faults["blob.bin"] += [status] * 5
    with pytest.raises(StoreError, match=rf"status {status}\) after 1 attempt:"):
        store.read_range(f"{server.url}/blob.bin", 0, 10)
    assert server.requests["blob.bin"] == 1


def test_a_server_that_does_not_answer_times_out(served):
    server, _ = served
    store = _listed(server, retries=0, timeout=0.5)
    server.faults["blob.bin"] += [("sleep", 3.0)]
    with pytest.raises(StoreError, match="after 1 attempt: .*Timeout"):
        store.read_range(f"{server.url}/blob.bin", 0, 10)


def test_unreachable_url_is_named(tmp_path):
    from tests.stores.servers import free_port
    url = f"http://127.0.0.1:{free_port()}/x.tar"
    with pytest.raises(StoreError, match=rf"{re.escape(url)}: stat failed after 1 attempt: "
                                         "ClientConnectorError: .*Connect call failed"):
        _store(retries=1).stat(url)


def test_http_shards_load_like_the_folder(image_folder, tmp_path, backend):
    from torch_bridge import make_loader
    shards = write_shards(image_folder, tmp_path / "wds", per_shard=10)
    opts = {"backend": backend, "batch_size": 8, "size": 32, "seed": 2}
    if backend == "torch":
        opts["reference"] = {"num_workers": 1}  # the store pickles into a worker
    with RangeServer(shards) as server:
        url = f"{server.url}/train-{{000000..000003}}.tar"
        got = copies(make_loader("image", url, cache_dir=str(tmp_path / "cache"), **opts))
    assert_same(got, copies(make_loader("image", image_folder, **opts)))
