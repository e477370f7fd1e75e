"""A proxy on 127.0.0.1 in front of a test server (the range server, moto's S3) that answers
as a misbehaving server, proxy or CDN might: another byte range than the one asked for (with an
honest Content-Range), no Content-Range or Content-Length, chunked bodies, Range ignored, no
validators, or its answer trickled a byte at a time (each byte well inside any socket read
timeout, the whole far past it). Settings are attributes, changed while it runs; the
fixtures at the end serve one file over HTTP and S3 through it."""
from __future__ import annotations

import http.client
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

from tests.stores.servers import MotoS3, RangeServer

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class Proxy(RangeServer):
    """Forwards GET and HEAD to `upstream` (http://host:port) and answers the client (the
    range server's loopback server, its own answers replaced by the upstream's).

    Attributes:
        shift: added to both ends of each Range forwarded upstream (the answer keeps the
            upstream's honest Content-Range for the shifted bytes).
        ignore_range: Range is not forwarded (the upstream answers 200 with everything).
        drop: response headers left out (lower case names), e.g. {"content-range"}.
        chunked: the body is sent chunked, without Content-Length.
        trickle: (seconds, count): the first `count` bytes of the answer go out one at a
            time, `seconds` apart (the rest at once); None: all at once.
        trickle_head: the trickle starts at the status line (slow headers), not the body.
    """

    def __init__(self, upstream: str):
        super().__init__(Path("."))
        self.upstream = urlsplit(upstream).netloc
        self.shift, self.ignore_range, self.chunked = 0, False, False
        self.drop: set[str] = set()
        self.trickle: tuple[float, int] | None = None
        self.trickle_head = False

    def _serve(self, handler, body: bool) -> None:
        self._forward(handler)

    def _request_headers(self, handler) -> dict[str, str]:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        ranged = headers.pop("Range", None) or headers.pop("range", None)
        if ranged and not self.ignore_range:
            lo, _, hi = ranged.removeprefix("bytes=").partition("-")
            hi = str(int(hi) + self.shift) if hi else ""
            headers["Range"] = f"bytes={int(lo) + self.shift}-{hi}"
        return headers

    def _forward(self, handler) -> None:
        upstream = http.client.HTTPConnection(self.upstream, timeout=30)
        try:
            upstream.request(handler.command, handler.path,
                             headers=self._request_headers(handler))
            answer = upstream.getresponse()
            body = answer.read()
            length = answer.getheader("Content-Length")
            headers = [(k, v) for k, v in answer.getheaders()
                       if k.lower() not in _HOP | self.drop]
            status, reason = answer.status, answer.reason
        finally:
            upstream.close()
        if handler.command == "GET":
            length = str(len(body))
        self._answer(handler, f"HTTP/1.1 {status} {reason}", headers, length, body)

    def _answer(self, handler, status: str, headers: list, length: str | None,
                body: bytes) -> None:
        head = [status] + [f"{k}: {v}" for k, v in headers]
        if self.chunked:
            head.append("Transfer-Encoding: chunked")
        elif length is not None and "content-length" not in self.drop:
            head.append(f"Content-Length: {length}")
        head.append("Connection: close")
        if handler.command == "HEAD":
            body = b""
        elif self.chunked:
            body = (f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"") \
                + b"0\r\n\r\n"
        raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        handler.close_connection = True
        self._send(handler.wfile, raw, 0 if self.trickle_head else len(raw) - len(body))

    def _send(self, out, raw: bytes, at: int) -> None:
        """`raw`, trickled from byte `at` on when `trickle` is set."""
        delay, count = self.trickle or (0.0, 0)
        try:
            out.write(raw[:at])
            for i in range(at, min(at + count, len(raw))):
                out.write(raw[i:i + 1])
                out.flush()
                time.sleep(delay)
            out.write(raw[at + count:])
            out.flush()
        except OSError:  # the client gave up and closed: what a bounded request does
            pass


def through(s3, proxy: Proxy) -> dict:
    """Storage options of moto's server `s3` (servers.MotoS3) reaching it through `proxy`."""
    client = {**s3.options["client_kwargs"], "endpoint_url": proxy.url}
    return {**s3.options, "client_kwargs": client}


def put(s3, path, bucket: str) -> str:
    """Upload the file `path` to s3://bucket/<its name> on moto's server `s3`; its URL."""
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    client.upload_file(str(path), bucket, path.name)
    return f"s3://{bucket}/{path.name}"


@contextmanager
def behind_proxy(kind: str, path: Path, s3) -> Iterator[tuple[dict, str, Proxy]]:
    """(store options, URL, proxy) of the file `path` served by the range server ("http")
    or moto's server `s3` ("s3", in a new bucket), through a Proxy."""
    if kind == "http":
        with RangeServer(path.parent) as server, Proxy(server.url) as proxy:
            yield {}, f"{proxy.url}/{path.name}", proxy
        return
    url = put(s3, path, f"proxied-{uuid.uuid4().hex[:12]}")
    with Proxy(s3.endpoint) as proxy:
        yield {"storage_options": through(s3, proxy)}, url, proxy


def moto_fixture():
    """A module-scoped pytest fixture: moto's S3 server (servers.MotoS3), running."""
    @pytest.fixture(scope="module")
    def moto():
        with MotoS3() as s3:
            yield s3
    return moto


def served_fixture(blob: np.ndarray):
    """A pytest fixture, run for "http" and "s3", giving (store options, URL, proxy) of a
    file holding `blob` behind a Proxy (it needs a `moto` fixture beside it)."""
    @pytest.fixture(params=["http", "s3"])
    def served(request, tmp_path, moto):
        (tmp_path / "blob.bin").write_bytes(blob.tobytes())
        with behind_proxy(request.param, tmp_path / "blob.bin", moto) as found:
            yield found
    return served
