"""Hyperspectral scenes in S3 (moto) and behind HTTP: the same patches as the local files on
both backends, windows read in byte ranges (never the whole cube), label maps read once,
short ranges and dead servers named per sample."""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from dali_pipes.sources.hyperspectral import HyperspectralSource
from dali_pipes.stores.remote import FsspecStore, StoreError
from dali_pipes.stores.remote_read import ObjectChanged
from tests.stores.servers import MotoS3, RangeServer
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import assert_same, copies

SCENES = ("a.hdr", "b.hdr", "c.spe")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> Path:
    """ENVI BIL int16, ENVI BSQ float32 big-endian and SPE uint16 scenes of 12x14 pixels."""
    root = tmp_path_factory.mktemp("cubes") / "scenes"
    small_scene_folder(root, lines=12, samples=14, bands=6, seed=4)
    return root


def upload(s3: MotoS3, root: Path, bucket: str = "cubes", prefix: str = "scenes") -> str:
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    for path in sorted(root.iterdir()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"


def _opts(backend: str, **kw) -> dict:
    opts = {"backend": backend, "batch_size": 32, "patch_size": 5, "seed": 3,
            "bands": [0, 2, 5], **kw}
    if backend == "torch":
        opts["reference"] = {"num_workers": 1}  # the source and its store pickle
    return opts


def test_s3_scenes_give_the_local_batches_cold_and_warm(scenes, tmp_path, backend):
    want = copies(make_loader("hyperspectral", scenes, **_opts(backend)))
    cache = str(tmp_path / "cache")
    with MotoS3() as s3:
        url = upload(s3, scenes)
        cold = make_loader("hyperspectral", url, storage_options=s3.options, cache_dir=cache,
                           **_opts(backend))
        assert_same(copies(cold), want)
        warm = make_loader("hyperspectral", url, storage_options=s3.options,
                           cache_dir=cache, **_opts(backend))
    assert_same(copies(warm), want)  # the server is gone: headers and windows from the cache


def test_http_scene_urls_read_only_the_windows(scenes):
    local = HyperspectralSource(scenes, patch_size=3)
    with RangeServer(scenes) as server:
        source = HyperspectralSource([f"{server.url}/{n}" for n in SCENES], patch_size=3,
                                     store=FsspecStore())
        assert len(source) == len(local)
        picks = range(0, len(local), 11)
        for i in picks:
            np.testing.assert_array_equal(source.read(i), local.read(i))
        for name in ("a.labels.npy", "b.labels.npy", "c.labels.npy"):
            assert server.requests[name] == 2  # one stat, one read: once for the source
        # one range per line of the window (BIL) or per band (BSQ), never the whole file
        reads_a = server.requests["a.img"]
        assert 0 < reads_a <= 3 * len([i for i in picks if source.scene_ids[i] == 0]) + 1


def test_http_folders_are_refused_naming_what_to_give(scenes):
    with RangeServer(scenes) as server:
        with pytest.raises(ValueError, match=r"/scenes/: this folder cannot be listed; "
                                             r"give the scenes' own paths"):
            HyperspectralSource(f"{server.url}/scenes/", store=FsspecStore())


def test_a_cube_cut_after_the_listing_is_an_error_naming_the_object(scenes, tmp_path):
    """The server's validators (ETag / Last-Modified) changed with the bytes: the read is
    refused as a changed object, naming it, before any short range could be used."""
    served = Path(shutil.copytree(scenes, tmp_path / "served"))
    with RangeServer(served) as server:
        source = HyperspectralSource([f"{server.url}/{n}" for n in SCENES], patch_size=3,
                                     store=FsspecStore(retries=0))
        data = served / "b.img"
        data.write_bytes(data.read_bytes()[:-10])  # cut inside the last band, after listing
        os.utime(data, ns=(time.time_ns() + 5 * 10**9,) * 2)  # a later Last-Modified
        last_b = int(np.flatnonzero(source.scene_ids == 1)[-1])
        with pytest.raises(ObjectChanged, match=re.escape(f"{server.url}/b.img") +
                           r": the object changed since it was listed"):
            source.read(last_b)


def test_on_error_skip_leaves_out_the_bad_scene_only(scenes, tmp_path, backend):
    served = Path(shutil.copytree(scenes, tmp_path / "served"))
    with RangeServer(served) as server:
        urls = [f"{server.url}/{n}" for n in SCENES]
        loader = make_loader("hyperspectral", urls, on_error="skip", shuffle=False,
                             storage_options={}, **_opts(backend))
        (served / "c.spe").unlink()  # gone after the listing: every patch of c fails
        got = np.concatenate([b["index"].numpy() for b in loader])
        bad = np.flatnonzero(HyperspectralSource(scenes, patch_size=5).scene_ids == 2)
        assert len(loader.skipped) == len(bad) and set(got) == \
            set(range(len(bad) + len(got))) - set(bad.tolist())
        assert all("c.spe" in s.path for s in loader.skipped)


def test_a_dead_server_fails_within_the_retries(scenes):
    with RangeServer(scenes) as server:
        source = HyperspectralSource([f"{server.url}/{n}" for n in SCENES], patch_size=3,
                                     store=FsspecStore(retries=1, backoff=0.01, timeout=2.0))
    # a refused connection is permanent: not retried (docs/data_sources.md, retries)
    with pytest.raises(StoreError, match=r"a\.img: read of bytes \d+\.\.\d+ failed after 1 "
                       r"attempt"):
        source.read(0)
