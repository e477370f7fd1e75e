"""Every modality over every store: the same tiny data set as local files, as tar shards
written by the pack tool (local, in S3 on moto, behind an HTTP server, in a store handed
in), as files in S3, in a store handed in (`store=`: the library's LocalStore wrapped under
a namespace of its own, tests/stores/user_stores.py) and, where no listing is needed, as
files behind HTTP; one epoch's batches must equal the local files' exactly on both backends.
Combinations refused by design are asserted as refusals (the README's table of modalities x
sources states what this module proves)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dali_pipes.pack import pack
from tests.conftest import MODALITY_KINDS
from tests.stores.servers import MotoS3, RangeServer
from tests.stores.user_stores import DictStore, MountedStore, copy_tree
from torch_bridge.testing.loader_contract import assert_same, copies

KINDS = MODALITY_KINDS
# Kinds whose files stay files (the pack tool refuses them: the reason), and the files a list
# of URLs names when a web server cannot list their folders.
NOT_PACKED = {"hyperspectral": "not packed into shards", "arrays": "modality must be one of"}
FILE_URLS = {"hyperspectral": ("*.hdr", "*.spe"), "arrays": ("*/*.npy",)}
STORES = ("local shards", "s3 files", "s3 shards", "http shards", "http files",
          "user files", "user shards")
_want: dict = {}  # (kind, backend) -> the local files' batches


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    with RangeServer(root) as server:
        yield server, root


def _put_tree(s3: MotoS3, root: Path, bucket: str, prefix: str) -> str:
    """Every file under `root` (at any depth) to s3://bucket/prefix/; that URL."""
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=bucket)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(root).as_posix()}",
                          Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"


@pytest.fixture(scope="module")
def stores(tiny_data, s3, http, tmp_path_factory):
    """`stores(kind)` -> {store: data} for the tiny data set of `kind`, made once; a
    kind in NOT_PACKED has no shards (the pack tool refuses it: see the refusal test)."""
    made: dict[str, dict] = {}
    server, served = http

    def get(kind: str) -> dict:
        if kind in made:
            return made[kind]
        folder = tiny_data(kind).one
        files = Path(shutil.copytree(folder, served / kind / "files"))
        out = {"local files": folder, "s3 files": _put_tree(s3, folder, f"every-{kind}",
                                                             "files"),
               "user files": ("mnt/files", MountedStore(files.parent))}
        if kind in FILE_URLS:  # the files' URLs: a web server lists no folders
            names = sorted(p.relative_to(files).as_posix() for pattern in FILE_URLS[kind]
                           for p in files.glob(pattern))
            out["http files"] = [f"{server.url}/{kind}/files/{n}" for n in names]
        else:
            out["http files"] = f"{server.url}/{kind}/files/"
        if kind not in NOT_PACKED:
            shards = served / kind / "shards"
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            pack(folder, shards, modality=kind, shard_size=size // 3, progress=False)
            names = sorted(p.name for p in shards.glob("*.tar"))
            assert len(names) >= 2, kind
            out["local shards"] = shards
            out["s3 shards"] = _put_tree(s3, shards, f"every-{kind}", "shards")
            out["http shards"] = [f"{server.url}/{kind}/shards/{n}" for n in names]
            user = DictStore()
            out["user shards"] = (copy_tree(shards, user, f"{kind}/shards"), user)
        made[kind] = out
        return out

    return get


def _loader(tiny, backend: str, data, s3: MotoS3):
    if isinstance(data, tuple):  # (a path in the store, the store handed in)
        return tiny.loader(backend, data=data[0], store=data[1], seed=7, shuffle=True)
    extra = {"storage_options": s3.options} if "s3://" in str(data) else {}
    return tiny.loader(backend, data=data, seed=7, shuffle=True, **extra)


def _local(tiny, backend: str, data, s3):
    key = (tiny.kind, backend)
    if key not in _want:
        _want[key] = copies(_loader(tiny, backend, data, s3))
        assert len(_want[key]) >= 2  # more than one batch: order and content both count
    return _want[key]


def _refused(kind: str, store: str) -> str | None:
    """The refusal a combination meets by design (a regex of its message), or None."""
    if kind in NOT_PACKED and "shards" in store:
        return NOT_PACKED[kind]
    if kind not in FILE_URLS and kind != "detection" and store == "http files":
        return "cannot be listed"
    return None


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_store_gives_the_local_batches(kind, store, backend, stores, tiny_data, s3,
                                             tmp_path):
    tiny = tiny_data(kind)
    data = stores(kind)
    refusal = _refused(kind, store)
    if refusal is not None:
        with pytest.raises(ValueError, match=refusal):
            if store in data:
                _loader(tiny, backend, data[store], s3)
            else:
                pack(tiny.one, tmp_path / "shards", modality=kind, progress=False)
        return
    want = _local(tiny, backend, data["local files"], s3)
    got = copies(_loader(tiny, backend, data[store], s3))
    if isinstance(data[store], list) and kind in FILE_URLS:
        # a list of file URLs is a list of sources: the batches also say which file
        assert all("source_id" in b for b in got) and "source_id" not in want[0]
        got = [{k: v for k, v in b.items() if k != "source_id"} for b in got]
    assert_same(got, want)
