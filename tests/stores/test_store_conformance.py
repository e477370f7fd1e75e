"""Every store passes the Store conformance suite (dali_pipes.testing.store_tests): local
files, HTTP with an ETag, HTTP with Last-Modified only, S3 (moto's server), and a store
written outside the library (an in-memory dict store, tests/stores/user_stores.py)."""
from __future__ import annotations

import pytest

from dali_pipes.stores.local import LocalStore
from dali_pipes.stores.remote import FsspecStore
from dali_pipes.testing.store_tests import StoreTests
from tests.stores.servers import MotoS3, RangeServer
from tests.stores.user_stores import DictStore


class TestLocalStore(StoreTests):
    @pytest.fixture
    def put(self, tmp_path):
        def write(name: str, data: bytes) -> str:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes(data)
            return str(tmp_path / name)
        return write

    def store(self):
        return LocalStore()


class _HttpStore(StoreTests):
    etag = True
    lists = False  # a web server's folders cannot be listed

    @pytest.fixture
    def put(self, tmp_path):
        with RangeServer(tmp_path, etag=self.etag) as server:
            def write(name: str, data: bytes) -> str:
                (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / name).write_bytes(data)
                return f"{server.url}/{name}"
            yield write

    def store(self):
        return FsspecStore(retries=0)


class TestHttpStoreWithEtag(_HttpStore):
    pass


class TestHttpStoreWithLastModifiedOnly(_HttpStore):
    etag = False
    rewrite_delay = 1.1


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


class TestS3Store(StoreTests):
    @pytest.fixture(autouse=True)
    def _options(self, s3):
        self.options = s3.options

    @pytest.fixture
    def put(self, s3, request):
        import boto3
        client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        bucket = "conformance"
        if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
            client.create_bucket(Bucket=bucket)
        prefix = request.node.name.replace("[", "_").replace("]", "")

        def write(name: str, data: bytes) -> str:
            client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
            return f"s3://{bucket}/{prefix}/{name}"
        return write

    def store(self):
        return FsspecStore(storage_options=self.options, retries=0)


class TestDictStore(StoreTests):
    @pytest.fixture
    def put(self):
        self.objects: dict = {}

        def write(name: str, data: bytes) -> str:
            DictStore(self.objects).put(f"mem/{name}", data)
            return f"mem/{name}"
        return write

    def store(self):
        return DictStore(getattr(self, "objects", None))
