"""Class folders (not shards) in S3, on moto's standalone server: one listing call, the same
batches as the local folder on both backends, refusals and dead endpoints named by URL, and
https:// folders refused with a pointer to what works."""
from __future__ import annotations

import re
import shutil
import socket
import urllib.request
from pathlib import Path

import pytest

from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.stores.remote import FsspecStore, StoreError
from tests.stores.servers import MotoS3, RangeServer
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import assert_same, copies


@pytest.fixture(scope="module")
def tree(image_folder, tmp_path_factory) -> Path:
    """The image folder with a sub-folder inside a class, a hidden file and a text file."""
    root = Path(shutil.copytree(image_folder, tmp_path_factory.mktemp("tree") / "train"))
    (root / "class_1" / "more" / "deeper").mkdir(parents=True)
    shutil.copy(root / "class_0" / "img_0000.jpg", root / "class_1" / "more" / "a.jpg")
    shutil.copy(root / "class_0" / "img_0003.jpg", root / "class_1" / "more" / "deeper" /
                "b.JPG")
    (root / "class_2" / "notes.txt").write_text("not an image")
    (root / "class_2" / ".hidden.jpg").write_bytes(b"x")
    (root / "README").write_text("beside the class folders")
    return root


def _upload(s3: MotoS3, root: Path, bucket: str = "data", prefix: str = "train") -> str:
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(root)}",
                          Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"


def _opts(backend: str, **kw) -> dict:
    opts = {"backend": backend, "batch_size": 8, "size": 32, "seed": 5, **kw}
    if backend == "torch":
        opts["reference"] = {"num_workers": 1}  # the source and its store pickle
    return opts


def test_s3_class_folders_load_like_the_local_folder(tree, tmp_path, backend, monkeypatch):
    local = ImageFolderSource(tree)
    want = copies(make_loader("image", tree, **_opts(backend)))
    with MotoS3() as s3:
        url = _upload(s3, tree)
        listed = []
        real = FsspecStore.list
        monkeypatch.setattr(FsspecStore, "list",
                            lambda self, u: listed.append(u) or real(self, u))
        monkeypatch.setattr(FsspecStore, "stat", _no_stat)  # no stat per file
        source = ImageFolderSource(url, store=FsspecStore(storage_options=s3.options))
        assert listed == [url] and len(source) == len(local) == 39
        assert source.classes == local.classes and (source.labels == local.labels).all()
        assert [f.removeprefix(url) for f in source.files] == \
            [f.removeprefix(f"{tree}/") for f in local.files]
        assert sorted(r.removeprefix(url) for r in source.ignored) == \
            ["class_2/.hidden.jpg", "class_2/notes.txt"]
        # names (relative to the root) and sizes as the local folder's; versions are ETags
        assert source.listing_digest().split(" (names)")[0] == \
            local.listing_digest().split(" (names)")[0]
        assert (source.listing.sizes == local.listing.sizes).all()
        assert_same(copies(make_loader("image", url, storage_options=s3.options,
                                       **_opts(backend))), want)
        assert listed == [url, url]  # make_loader too: one listing decides and lists
        cached = make_loader("image", url, storage_options=s3.options,
                             cache_dir=str(tmp_path / "cache"), **_opts(backend))
        assert_same(copies(cached), want)
        warm = make_loader("image", url, storage_options=s3.options,
                           cache_dir=str(tmp_path / "cache"), **_opts(backend))
    assert_same(copies(warm), want)  # server gone: the warm cache serves the pass


def test_a_server_gone_after_the_listing_names_the_url(tree):
    with MotoS3() as s3:
        url = _upload(s3, tree)
        source = ImageFolderSource(url, store=FsspecStore(storage_options=s3.options,
                                                          retries=1, backoff=0.01, timeout=2.0))
        assert source.read(0).size == (90, 120)
    with pytest.raises(StoreError, match=re.escape(url) + r"class_0/img_0003\.jpg: read of "
                       r"bytes 0\.\.\d+ failed after 1 attempt: EndpointConnectionError"):
        source.read(1)


def _no_stat(self, url):
    raise AssertionError(f"stat({url}) asked: the listing has every size")


def test_a_refused_listing_names_the_url(tree):
    with MotoS3() as s3:
        url = _upload(s3, tree)
        _moto_auth(s3, "0")  # from now on moto checks credentials: ours are unknown (403)
        try:
            with pytest.raises(StoreError, match=re.escape(url) + r": list failed \(status "
                               r"403\) after 1 attempt: PermissionError"):
                make_loader("image", url, storage_options=s3.options, batch_size=4)
        finally:
            _moto_auth(s3, "inf")


def _moto_auth(s3: MotoS3, count: str) -> None:
    """Requests moto serves before it starts checking credentials (its own API)."""
    request = urllib.request.Request(f"{s3.endpoint}/moto-api/reset-auth", method="POST",
                                     data=count.encode(), headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def test_an_unreachable_endpoint_names_the_url():
    with socket.socket() as held:  # bound, never listening: refused, and no server of a
        held.bind(("127.0.0.1", 0))  # test running beside this one can take the port
        options = {"key": "k", "secret": "s", "client_kwargs": {
            "endpoint_url": f"http://127.0.0.1:{held.getsockname()[1]}",
            "region_name": "us-east-1"}}
        # a refused connection is not retried; the timeout only has to outlast a loaded machine
        store = FsspecStore(storage_options=options, retries=1, backoff=0.01, timeout=20.0)
        with pytest.raises(StoreError,
                           match=r"s3://nobody/train/: list failed after 1 attempt"):
            ImageFolderSource("s3://nobody/train/", store=store)


def test_empty_and_flat_prefixes_are_value_errors_naming_the_url(tree, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(tree / "class_0" / "img_0000.jpg", flat / "x.jpg")
    (flat / "docs").mkdir()
    (flat / "docs" / "a.txt").write_text("x")
    with MotoS3() as s3:
        store = FsspecStore(storage_options=s3.options)
        url = _upload(s3, flat, prefix="flat")
        with pytest.raises(ValueError, match=re.escape(url.rstrip("/")) +
                           r": 1 class folders but no image files"):
            ImageFolderSource(url, store=store)
        with pytest.raises(ValueError, match=r"s3://data/none: no class folders"):
            ImageFolderSource("s3://data/none/", store=store)


def test_https_folders_are_refused_with_what_to_use_instead(tree):
    with RangeServer(tree) as server:
        with pytest.raises(ValueError, match=r"/train/: folders behind http:// cannot be "
                           r"listed; use WebDataset shards .* or a store that lists"):
            make_loader("image", f"{server.url}/train/", batch_size=4, cache_dir="/tmp/c")
