"""The pack tool between stores, on the local engine: a bucket into a bucket (moto's S3 on
127.0.0.1) gives the shards a local pack gives, resumes without rewriting a shard, refuses a
second packer through leases, names an object that cannot be read, and its destinations
never show a partial object."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from io import BytesIO
from pathlib import Path

import pytest

import dali_pipes.pack._leases as leases
import dali_pipes.pack._shard as shard_job
from dali_pipes.pack import PackRun, pack
from dali_pipes.pack._args import PackArgumentError
from dali_pipes.pack._owned import PackRefused
from dali_pipes.sample_data import tiny_data
from dali_pipes.sample_data.tiny_data import write_image_folder
from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.destination import HOST, open_destination
from dali_pipes.stores.remote import FsspecStore
from tests.stores.servers import MotoS3
from tests.test_pack_resume import _cli

SHARD = 40_000


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


def objects(s3: MotoS3, url: str) -> dict[str, bytes]:
    """{name: bytes} of the objects directly under the folder `url` (lock files left out)."""
    bucket, _, prefix = url.removeprefix("s3://").rstrip("/").partition("/")
    client = s3.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    return {o["Key"][len(prefix) + 1:]: client.get_object(Bucket=bucket, Key=o["Key"])
            ["Body"].read() for o in listed
            if "/" not in o["Key"][len(prefix) + 1:] and not o["Key"].endswith(".lock")}


def versions(s3: MotoS3, url: str) -> dict[str, list[str]]:
    """{key: its version ids} under `url` in a bucket with versioning on."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    found = s3.client().list_object_versions(Bucket=bucket, Prefix=prefix).get("Versions", [])
    out: dict[str, list[str]] = {}
    for v in found:
        out.setdefault(v["Key"].rsplit("/", 1)[-1], []).append(v["VersionId"])
    return out


def tar_members(data: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]


def local_tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".npz")}


def same_shards(remote: dict[str, bytes], local: dict[str, bytes]) -> None:
    """The shards hold the same bytes and their records the same samples, bytes, sha256."""
    assert sorted(n for n in remote if n.endswith(".tar")) == sorted(
        n for n in local if n.endswith(".tar"))
    for name in (n for n in local if n.endswith(".tar")):
        assert remote[name] == local[name], name
        got, want = (json.loads(t[f"{name}.json"]) for t in (remote, local))
        assert {k: got[k] for k in ("samples", "bytes", "sha256")} == {
            k: want[k] for k in ("samples", "bytes", "sha256")}, name


def test_local_engine_packs_a_bucket_into_a_bucket_and_resumes_without_rewriting(
        image_folder, s3, tmp_path, capsys):
    src = s3.put_tree(image_folder, "packs", "a/src")
    s3.client().put_bucket_versioning(Bucket="packs",
                                      VersioningConfiguration={"Status": "Enabled"})
    dst, run = "s3://packs/a/out", PackRun(storage_options=s3.options)
    manifest = pack(src, dst, shard_size=SHARD, progress=False, run=run)
    pack(image_folder, tmp_path / "local", shard_size=SHARD, progress=False)
    written = objects(s3, dst)
    same_shards(written, local_tree(tmp_path / "local"))
    assert manifest["classes"] == ["class_0", "class_1", "class_2"]
    shards = ShardSource(dst, store=FsspecStore(storage_options=s3.options),
                         index_dir=str(tmp_path / "index"))
    assert shards.labels.tolist() == ImageFolderSource(image_folder).labels.tolist()
    before = versions(s3, dst)
    capsys.readouterr()
    pack(src, dst, shard_size=SHARD, progress=False, run=run)  # finished: nothing to write
    assert "packed" not in capsys.readouterr().err
    after = versions(s3, dst)
    assert {k: v for k, v in after.items() if k.startswith("shard-")} == {
        k: v for k, v in before.items() if k.startswith("shard-")}
    bucket, key = "packs", "a/out/shard-000001.tar"
    damaged = bytearray(written["shard-000001.tar"])
    damaged[600] ^= 0xFF  # same size, other bytes
    s3.client().put_object(Bucket=bucket, Key=key, Body=bytes(damaged))
    pack(src, dst, shard_size=SHARD, progress=False, run=run)
    assert "shard-000001.tar: damaged: sha256 differs" in capsys.readouterr().err
    assert objects(s3, dst)["shard-000001.tar"] == written["shard-000001.tar"]


@pytest.mark.parametrize("modality", ["video", "fusion", "frames", "detection"])
def test_every_modality_packs_from_a_bucket_as_from_local_files(s3, tmp_path, modality):
    from dali_pipes.sample_data import sample_detection
    write = {"video": lambda p: tiny_data.video(p, 0), "fusion": lambda p: tiny_data.fusion(p, 1),
             "frames": lambda p: tiny_data.frames(p, 1),
             "detection": lambda p: sample_detection.tiny(p, 1)}[modality]
    folder = write(tmp_path / "src")
    src = s3.put_tree(folder, "modalities", f"{modality}/src")
    dst = f"s3://modalities/{modality}/out"
    pack(src, dst, modality=modality, shard_size=8192, progress=False,
         storage_options=s3.options)  # PackRun's fields as keywords
    pack(folder, tmp_path / "local", modality=modality, shard_size=8192, progress=False)
    remote, local = objects(s3, dst), local_tree(tmp_path / "local")
    same_shards(remote, local)
    assert [tar_members(remote[n]) for n in sorted(remote) if n.endswith(".tar")] == [
        tar_members(local[n]) for n in sorted(local) if n.endswith(".tar")]
    if modality == "detection":
        assert remote["categories.json"] == local["categories.json"]


def _lock(dest, name: str, host: str, pid: int, expires_in: float) -> None:
    dest.write(name, json.dumps({"holder": f"pid {pid} on {host}", "host": host, "pid": pid,
                                 "token": "t", "expires": time.time() + expires_in}).encode())


def test_locks_on_s3_refuse_a_live_packer_and_take_over_dead_ones(s3, tmp_path, capsys):
    src = s3.put_tree(write_image_folder(tmp_path / "src", n_images=4, n_classes=2),
                      "locks", "src")
    dst = "s3://locks/out"
    dest = open_destination(dst, s3.options)
    argv = [src, dst, "--storage-options", json.dumps(s3.options)]
    with leases.leased(dest, (0, 1), overwrite=False):
        code, err = _cli(capsys, *argv)
        assert code == 1 and f"part 0/1 is being packed by pid {os.getpid()} on" in err, err
        code, err = _cli(capsys, *argv, "--overwrite")
        assert code == 1 and "other packers are writing it (pid" in err, err
    assert ".pack-part-0-of-1.lock" not in dest.names()  # deleted on the way out
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    lock = ".pack-part-0-of-1.lock"
    _lock(dest, lock, HOST, dead, 600)  # a packer killed on this host: its lock is stale
    assert _cli(capsys, *argv)[0] == 0
    _lock(dest, lock, "elsewhere", 1, -1)  # another host's lease ran out
    assert _cli(capsys, *argv, "--overwrite")[0] == 0
    _lock(dest, lock, "elsewhere", 1, 600)  # another host's live lease
    code, err = _cli(capsys, *argv)
    assert code == 1 and "part 0/1 is being packed by pid 1 on elsewhere" in err
    _lock(dest, ".pack.lock", "elsewhere", 2, 600)
    dest.delete(lock)
    code, err = _cli(capsys, *argv)
    assert code == 1 and "being overwritten by pid 2 on elsewhere" in err
    assert lock not in dest.names()


def test_a_lease_taken_over_stops_the_run_before_its_manifest(s3, monkeypatch):
    dest = open_destination("s3://locks/lost", s3.options)
    s3.bucket("locks")
    monkeypatch.setattr(leases, "RENEW_S", 0.01)
    with pytest.raises(PackRefused, match="lost its lock .pack-part-0-of-1.lock"):
        with leases.leased(dest, (0, 1), overwrite=False) as still_held:
            _lock(dest, ".pack-part-0-of-1.lock", "elsewhere", 1, 600)  # taken over
            for _ in range(10_000):
                still_held()
                time.sleep(0.01)


def test_an_object_gone_after_the_listing_is_named(s3, tmp_path, monkeypatch, capsys):
    src = s3.put_tree(write_image_folder(tmp_path / "src", n_images=4, n_classes=2),
                      "gone", "src")
    victim = "src/class_1/img_0003.jpg"
    read = shard_job.read_member

    def vanishing(store, blob):
        if getattr(blob, "path", "").endswith(victim):
            s3.client().delete_object(Bucket="gone", Key=victim)
        return read(store, blob)
    monkeypatch.setattr(shard_job, "read_member", vanishing)
    code, err = _cli(capsys, src, "s3://gone/out", "--storage-options", json.dumps(s3.options))
    assert code == 1 and "failed: MissingObject: s3://gone/src/class_1/img_0003.jpg" in err
    assert "resume" in err


def test_destinations_show_whole_objects_or_none(s3, tmp_path):
    s3.bucket("dest")
    for dest in (open_destination(tmp_path / "local"),
                 open_destination("s3://dest/out", {**s3.options,
                                                   "default_block_size": 5 << 20}),
                 open_destination(f"memory://{tmp_path.name}/out")):
        dest.make()
        with pytest.raises(RuntimeError):
            with dest.writer("big") as f:
                f.write(b"x" * (6 << 20))  # past S3's block size: a multipart upload
                raise RuntimeError("the writer failed")
        assert dest.names() == {}, dest  # no object, no temporary one
        with dest.writer("big") as f:
            f.write(b"y" * 10)
        assert dest.read("big") == b"y" * 10 and list(dest.names()) == ["big"]
        tag = dest.create("plan", b"1")
        assert tag is not None and dest.create("plan", b"2") is None
        assert dest.read("plan") == b"1"
    uploads = s3.client().list_multipart_uploads(Bucket="dest").get("Uploads", [])
    assert uploads == []  # the failed one was aborted


def test_a_killed_writers_incomplete_upload_is_aborted_by_the_next_run(s3, tmp_path, capsys):
    """S3 never shows an incomplete multipart upload, but keeps (and bills) its parts until
    it is aborted: a rerun aborts those of the shards it writes, and only those."""
    src = s3.put_tree(write_image_folder(tmp_path / "src", n_images=4, n_classes=2),
                      "uploads", "src")
    client = s3.client()
    for key in ("out/shard-000000.tar", "out/notes.bin"):
        upload = client.create_multipart_upload(Bucket="uploads", Key=key)
        client.upload_part(Bucket="uploads", Key=key, UploadId=upload["UploadId"],
                           PartNumber=1, Body=b"half a shard")
    code, err = _cli(capsys, src, "s3://uploads/out", "--storage-options",
                     json.dumps(s3.options))
    assert code == 0 and "aborted the incomplete uploads of shard-000000.tar" in err, err
    left = client.list_multipart_uploads(Bucket="uploads").get("Uploads", [])
    assert [u["Key"] for u in left] == ["out/notes.bin"]


def test_s3_conditional_requests_decide_one_writer(s3):
    """On S3 (moto), create / replace / delete are conditional: a stale tag loses."""
    s3.bucket("cond")
    dest = open_destination("s3://cond/out", s3.options)
    tag = dest.create("lock", b"a")
    newer = dest.replace("lock", b"b", tag)
    assert newer is not None and dest.replace("lock", b"c", tag) is None
    assert dest.read_tagged("lock") == (b"b", newer)
    assert not dest.delete("lock", tag) and dest.delete("lock", newer)
    assert dest.read_tagged("lock") is None


def test_memory_urls_pack_as_local_folders(image_folder, tmp_path):
    """Another fsspec protocol (memory://): shards under a temporary name, then moved."""
    pack(image_folder, tmp_path / "local", shard_size=SHARD, progress=False)
    dst = f"memory://{tmp_path.name}/shards"
    pack(image_folder, dst, shard_size=SHARD, progress=False)
    dest = open_destination(dst)
    local = local_tree(tmp_path / "local")
    same_shards({n: dest.read(n) for n in dest.names()}, local)
    assert not any(n.endswith(".tmp") for n in dest.names())


@pytest.mark.parametrize("argv, said", [
    (["--storage-options", "{not json"], "argument --storage-options: not JSON"),
    (["--storage-options", "[1]"], "a JSON object is needed"),
    (["--ray-address", "127.0.0.1:6379"], "is for engine='ray'"),
])
def test_engine_and_store_options_are_checked(image_folder, tmp_path, capsys, argv, said):
    code, err = _cli(capsys, image_folder, tmp_path / "o", *argv)
    assert code == 2 and said in err, err
    assert not (tmp_path / "o").exists()


def test_urls_are_checked_before_anything_is_written(capsys, tmp_path, monkeypatch):
    code, err = _cli(capsys, "s3://bucket/train", "s3://bucket/train/shards")
    assert code == 2 and "DST s3://bucket/train/shards is inside SRC" in err
    code, err = _cli(capsys, tmp_path, tmp_path.parent / "o", "--storage-options", "{}")
    assert code == 2 and "storage_options apply to URLs" in err, err
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    code, err = _cli(capsys, tmp_path, tmp_path.parent / "o2", "--engine", "ray")
    assert code == 2 and 'pip install "dali-pipes[ray]"' in err, err
    assert not (tmp_path.parent / "o2").exists()



def test_the_engine_keywords_are_one_packrun(tmp_path):
    from dali_pipes.pack import pack_run
    assert pack_run({"engine": "ray", "ray_address": "auto"}) == \
        PackRun(engine="ray", ray_address="auto")
    assert pack_run({"run": PackRun(engine="ray")}) == PackRun(engine="ray")
    assert pack_run({}) == PackRun()
    with pytest.raises(PackArgumentError, match="not both"):
        pack_run({"run": PackRun(), "engine": "ray"})
    with pytest.raises(TypeError, match="'engin'; did you mean 'engine'"):
        pack(tmp_path, tmp_path / "out", engin="ray")
