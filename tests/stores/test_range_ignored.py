"""A plain static web server (Python's own) ignores Range headers and answers 200 with the
whole object: reads take their bytes out of it (with a warning that each read costs the whole
object) instead of failing as if the object had changed."""
from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from dali_pipes.stores.remote import FsspecStore


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def plain_server(tmp_path):
    blob = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)
    (tmp_path / "blob.bin").write_bytes(blob.tobytes())
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/blob.bin", blob
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("cache", [False, True])
def test_a_server_ignoring_ranges_still_gives_the_right_bytes(plain_server, tmp_path, cache):
    url, blob = plain_server
    options = {"cache_dir": str(tmp_path / "cache"), "block_size": 1024} if cache else {}
    store = FsspecStore(backoff=0.01, timeout=5.0, **options)
    with pytest.warns(UserWarning, match="ignores byte ranges"):
        got = store.read_range(url, 1234, 100)
    assert np.array_equal(got, blob[1234:1334])
