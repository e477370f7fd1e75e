"""Gzip-compressed WebDataset shards (`.tar.gz`, `.tgz`, as WebDataset ships its own test
data) are refused at make_loader with a message naming the file and saying to gunzip it,
whether named directly, in a list, by a brace pattern, by their folder or by URL."""
from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.stores.servers import MotoS3, RangeServer
from torch_bridge import make_loader

SAID = r"gzip-compressed shard: gunzip it \(`gunzip -k FILE`"


def _write_gzip_shard(path: Path, samples: int = 3) -> Path:
    """A WebDataset shard of JPEGs and `.cls` labels, gzip-compressed as a whole."""
    with tarfile.open(path, "w:gz") as tar:
        for i in range(samples):
            jpeg = io.BytesIO()
            Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(jpeg, format="JPEG")
            for name, data in ((f"{i:06d}.jpg", jpeg.getvalue()), (f"{i:06d}.cls", b"0")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gz")
    for name in ("train-0.tar.gz", "train-1.tar.gz", "extra.tgz"):
        _write_gzip_shard(folder / name)
    return folder


def _refused(data, name: str, modality: str = "image") -> None:
    with pytest.raises(ValueError, match=re.escape(name) + r": " + SAID):
        make_loader(modality, data, backend="torch", batch_size=2,
                    reference={"num_workers": 0})


@pytest.mark.parametrize("modality", ["image", "video", "detection"])
def test_a_local_gzip_shard_is_refused_naming_it(shards, modality):
    _refused(str(shards / "train-0.tar.gz"), "train-0.tar.gz", modality)
    _refused(shards / "extra.tgz", "extra.tgz", modality)


def test_lists_patterns_and_folders_of_gzip_shards_are_refused(shards):
    _refused([str(shards / "train-0.tar.gz"), str(shards / "train-1.tar.gz")],
             "train-0.tar.gz (and 1 more)")
    _refused(str(shards / "train-{0..1}.tar.gz"), "train-0.tar.gz (and 1 more)")
    _refused(str(shards), "extra.tgz (and 2 more)")


def test_a_folder_with_other_files_beside_a_gzip_archive_is_not_taken_for_shards(tmp_path):
    """A detection images folder holding a downloaded archive is still an images folder."""
    from dali_pipes.sample_data.sample_detection import tiny
    from dali_pipes.sources.shard_names import is_shard_data
    images = tiny(tmp_path / "det", 1)
    _write_gzip_shard(images / "download.tar.gz")
    assert not is_shard_data(images)
    loader = make_loader("detection", images, backend="torch", batch_size=2,
                         reference={"num_workers": 0})
    assert len(loader) > 0


def test_gzip_shards_behind_urls_are_refused_naming_them(shards):
    with RangeServer(shards) as server:
        for modality in ("image", "video", "detection"):
            _refused(f"{server.url}/train-1.tar.gz", f"{server.url}/train-1.tar.gz", modality)
    with MotoS3() as s3:
        import boto3
        client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket="gzip-shards")
        client.put_object(Bucket="gzip-shards", Key="d/train-0.tar.gz",
                          Body=(shards / "train-0.tar.gz").read_bytes())
        with pytest.raises(ValueError, match=r"gzip-shards/d/train-0\.tar\.gz: " + SAID):
            make_loader("image", "s3://gzip-shards/d/", backend="torch", batch_size=2,
                        storage_options=s3.options, reference={"num_workers": 0})
