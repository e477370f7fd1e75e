"""The loader contract (torch_bridge.testing.loader_contract) on WebDataset shards in S3, read
from moto's standalone server on 127.0.0.1 through fsspec, on both backends."""
from __future__ import annotations

import re

import pytest

from tests.conftest import TinyData
from tests.sources import test_shards_contract as local_contract
from tests.sources.shard_data import write_shards
from tests.stores.servers import MotoS3


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


class TestS3ShardContract(local_contract.TestShardContract):
    runs_key = "image-s3-shards"  # cached apart from the image runs
    @pytest.fixture
    def tiny(self, tiny_data, tmp_path_factory, s3, monkeypatch):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("HOME", str(tmp_path_factory.getbasetemp() / "s3_home"))
        folders = tiny_data("image")
        base = tmp_path_factory.getbasetemp() / "tiny_s3_shards"
        urls = []
        for i, folder in enumerate(folders.two):
            local = base / f"shards_{i}"
            if not local.exists():
                write_shards(folder, local, per_shard=3)
            urls.append(s3.upload(local, "contract", f"source{i}"))
        data = TinyData("image", urls[0], urls)
        data.options["storage_options"] = s3.options
        self.local = base / "shards_0"
        return data

    def _count(self, tiny, data=None) -> int:
        from dali_pipes.sources.shards import ShardSource
        from dali_pipes.stores.remote import FsspecStore
        return len(ShardSource(tiny.one if data is None else data, store=FsspecStore(
            storage_options=tiny.options["storage_options"])))

    def _broken(self, tiny, backend, tmp_path, on_error):
        """A copy of the shards with sample 1 garbled, uploaded under a prefix of its own."""
        import shutil
        from types import SimpleNamespace

        from dali_pipes.sources.shards import ShardSource
        local = shutil.copytree(self.local, tmp_path / "shards")
        for index in local.glob("*.index.npz"):
            index.unlink()
        local_contract._garble_member(SimpleNamespace(source=ShardSource(local)), 1)
        url = self._s3.upload(local, "contract", f"broken-{tmp_path.name}")
        loader = tiny.loader(backend, data=url, on_error=on_error, shuffle=False)
        return loader, {1}, re.escape(loader._engine.modality.path(1)), "not an image"

    @pytest.fixture(autouse=True)
    def _keep_server(self, s3):
        self._s3 = s3
