"""Loopback servers for store tests: a static HTTP server with byte ranges and injected
faults, and moto's standalone S3 server. Both bind 127.0.0.1 on a free port."""
from __future__ import annotations

import email.utils
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RangeServer:
    """Serves the files of `root` with Last-Modified (from the file's mtime) and, unless
    `etag=False`, an ETag; `faults[path]` is a list of actions taken by the next requests
    for it: an HTTP status to answer, ("sleep", seconds) before answering, or ("short", n)
    to send n bytes fewer than asked (a consistent, shorter answer). `requests` counts the
    requests per path, `most_in_flight` the most answered at once."""

    def __init__(self, root: Path, *, etag: bool = True):
        self.root, self.faults, self.requests = root, defaultdict(list), defaultdict(int)
        self.etag = etag
        self.in_flight = self.most_in_flight = 0  # GETs and HEADs being answered
        self._count = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                server._serve(self, body=False)

            def do_GET(self):
                server._serve(self, body=True)

        # port 0: the kernel picks a free one while binding (no window for another process)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, handler, body: bool) -> None:
        with self._count:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self._answer_file(handler, body)
        finally:
            with self._count:
                self.in_flight -= 1

    def _answer_file(self, handler, body: bool) -> None:
        name = handler.path.lstrip("/")
        self.requests[name] += 1
        short = 0
        if self.faults[name]:
            action = self.faults[name].pop(0)
            if isinstance(action, tuple) and action[0] == "short":
                short = action[1]
            elif isinstance(action, tuple):
                time.sleep(action[1])
            else:
                handler.send_error(action)
                return
        path = self.root / name
        if not path.is_file():
            handler.send_error(404)
            return
        data = path.read_bytes()
        start, end = 0, len(data)
        ranged = handler.headers.get("Range")
        if ranged:
            lo, _, hi = ranged.removeprefix("bytes=").partition("-")
            start, end = int(lo), min(int(hi) + 1 if hi else len(data), len(data))
        end = max(start, end - short)
        mtime = os.stat(path).st_mtime_ns
        handler.send_response(206 if ranged else 200)
        handler.send_header("Content-Length", str(end - start))
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("Last-Modified", email.utils.formatdate(mtime / 1e9, usegmt=True))
        if self.etag:
            handler.send_header("ETag", f'"{mtime}-{len(data)}"')
        if ranged:
            handler.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        handler.end_headers()
        if body:
            handler.wfile.write(data[start:end])


@contextmanager
def served_file(folder: Path, name: str, data: bytes) -> Iterator[tuple[RangeServer, str]]:
    """`data` as `folder/name` behind a RangeServer: (the server, the file's URL)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    with RangeServer(folder) as server:
        yield server, f"{server.url}/{name}"


class MotoS3:
    """moto's standalone S3 server on 127.0.0.1, and storage options reaching it."""

    def __init__(self):
        from moto.server import ThreadedMotoServer
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port,
                                         verbose=False)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.options = {"key": "testing", "secret": "testing",
                        "client_kwargs": {"endpoint_url": self.endpoint,
                                          "region_name": "us-east-1"}}

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop()

    def client(self):
        """A boto3 S3 client of this server."""
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def bucket(self, bucket: str):
        """A boto3 client, with `bucket` created when it was not there."""
        client = self.client()
        if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
            client.create_bucket(Bucket=bucket)
        return client

    def put_tree(self, folder: Path, bucket: str, prefix: str) -> str:
        """Put every file under `folder` at s3://bucket/prefix/<its relative path>; return
        that URL."""
        return put_tree(self.bucket(bucket), folder, bucket, prefix)

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Put the `.tar` files of `folder` under s3://bucket/prefix/; return that URL."""
        import s3fs
        self.bucket(bucket)
        fs = s3fs.S3FileSystem(**self.options, skip_instance_cache=True)
        for shard in sorted(folder.glob("*.tar")):
            fs.put_file(str(shard), f"{bucket}/{prefix}/{shard.name}")
        return f"s3://{bucket}/{prefix}/"


def put_tree(client, folder: Path, bucket: str, prefix: str) -> str:
    """Put every file under `folder` at s3://bucket/prefix/<its relative path> with the
    boto3 `client` (the bucket exists); return that URL."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder)}",
                          Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"
