"""Detection from S3 (moto): an images folder beside its COCO file, and shards of image +
annotations JSON (packed by the pack tool), against the local folder on both backends;
malformed annotations are per-sample errors naming the member and the field."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.pack import pack
from dali_pipes.sample_data.sample_detection import CATEGORIES, tiny
from dali_pipes.sources.detection import DetectionSource
from dali_pipes.sources.detection_shards import DetectionShardSource
from dali_pipes.stores.remote import FsspecStore
from dali_pipes.stores.shard_writer import write_sample_shard
from tests.stores.servers import MotoS3
from torch_bridge import make_loader
from torch_bridge.testing.loader_contract import assert_same, copies

FIELDS = ("image_ids", "heights", "widths", "offsets", "boxes", "box_labels", "iscrowd",
          "ann_ids", "labels", "category_ids")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tiny(tmp_path_factory.mktemp("det") / "images", 0)


@pytest.fixture(scope="module")
def shards(folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("det") / "shards"
    pack(folder, out, modality="detection", shard_size=8192, progress=False)
    return out


def _put(s3: MotoS3, root: Path, bucket: str, prefix: str) -> str:
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=bucket)
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"


def _opts(backend: str, **kw) -> dict:
    opts = {"backend": backend, "batch_size": 4, "size": 32, "seed": 2, "masks": True, **kw}
    if backend == "torch":
        opts["reference"] = {"num_workers": 1}
    return opts


def assert_same_targets(got, want) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.segmentations == want.segmentations and got.classes == want.classes


def test_shards_hold_the_folder_samples(folder, shards):
    local, packed = DetectionSource(folder), DetectionShardSource(shards)
    assert_same_targets(packed, local)
    assert json.loads((shards / "manifest.json").read_text())["classes"] == \
        [c["name"] for c in CATEGORIES]
    for i in range(len(local)):
        a, b = local.read(i), packed.read(i)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]


def test_s3_folder_and_shards_give_the_local_batches(folder, shards, tmp_path, backend):
    want = copies(make_loader("detection", folder, **_opts(backend)))
    assert_same(copies(make_loader("detection", shards, **_opts(backend))), want)
    with MotoS3() as s3:
        images = _put(s3, folder, "det", "images")
        packed = _put(s3, shards, "det", "shards")
        remote = DetectionSource(images, annotations="s3://det/images/instances.json",
                                 store=FsspecStore(storage_options=s3.options))
        assert_same_targets(remote, DetectionSource(folder))
        got = make_loader("detection", images, annotations="s3://det/images/instances.json",
                          storage_options=s3.options, cache_dir=str(tmp_path / "c"),
                          **_opts(backend))
        assert_same(copies(got), want)
        assert_same(copies(make_loader("detection", packed, storage_options=s3.options,
                                       **_opts(backend))), want)


def _bad_shards(folder: Path, out: Path) -> Path:
    """Two shards: sample 1's JSON is cut short, sample 2's box lies outside its image."""
    source = DetectionSource(folder, crowd="keep")
    samples = []
    for i in range(4):
        record = {"height": int(source.heights[i]), "width": int(source.widths[i]),
                  "annotations": [{"bbox": [1, 1, 5, 5], "category_id": 3, "iscrowd": 0,
                                   "segmentation": [[1, 1, 6, 1, 6, 6]]}]}
        if i == 2:
            record["annotations"][0]["bbox"] = [1, 1, 500, 5]
        raw = json.dumps(record).encode()
        samples.append((f"{i:04d}", [("jpg", source.files[i]),
                                     ("json", raw[:-7] if i == 1 else raw)]))
    out.mkdir()
    write_sample_shard(str(out / "a.tar"), samples[:2])
    write_sample_shard(str(out / "b.tar"), samples[2:])
    (out / "categories.json").write_text(json.dumps(list(CATEGORIES)))
    return out


def test_malformed_annotations_fail_their_sample_only(folder, tmp_path, backend):
    bad = _bad_shards(folder, tmp_path / "bad")
    source = DetectionShardSource(bad)
    with pytest.raises(FormatError, match=re.escape(f"{bad}/a.tar:0001.json: JSON: "
                                                    "malformed")):
        source.read(1)
    with pytest.raises(FormatError, match=r"b\.tar:0002\.json: annotation 1\.bbox: outside "
                       r"the \d+x\d+ image"):
        source.read(2)
    loader = make_loader("detection", bad, on_error="skip", shuffle=False, **_opts(backend))
    got = [i for b in loader for i in b["index"].tolist()]
    assert got == [0, 3] and sorted(s.index for s in loader.skipped) == [1, 2]


def test_categories_missing_is_named(folder, tmp_path):
    bad = _bad_shards(folder, tmp_path / "bad")
    (bad / "categories.json").unlink()
    with pytest.raises(FormatError, match=r"categories\.json: categories: missing"):
        DetectionShardSource(bad)
    given = DetectionShardSource(bad, categories=list(CATEGORIES))
    assert given.classes == ("box", "ellipse", "triangle")
