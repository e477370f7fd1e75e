"""Shard members as real writers store them: names that are not ASCII or longer than 100
bytes (PAX path records, GNU long names, ustar prefixes), JSON labels of any size, and
damaged cached indexes."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from dali_pipes.sources.protocol import STORED
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.tar_index import load_index
from torch_bridge import make_loader

KEYS = ["ünïcode/日本", "plain", "d" * 120 + "/long", "é" * 60]  # the last: 120 bytes


def _jpeg(seed: int) -> bytes:
    return encode_jpeg(photo_like(np.random.default_rng(seed), 40, 48))


def _tarfile_shard(path: Path, fmt: int, keys=KEYS) -> Path:
    with tarfile.open(path, "w", format=fmt) as tar:
        for i, key in enumerate(keys):
            for name, data in ((f"{key}.jpg", _jpeg(i)), (f"{key}.cls", str(i).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _webdataset_shard(path: Path, keys=KEYS) -> Path:
    import webdataset as wds
    with wds.TarWriter(str(path)) as writer:
        for i, key in enumerate(keys):
            writer.write({"__key__": key, "jpg": _jpeg(i), "cls": i})
    return path


WRITERS = {"pax": lambda p: _tarfile_shard(p, tarfile.PAX_FORMAT),
           "gnu": lambda p: _tarfile_shard(p, tarfile.GNU_FORMAT),
           "webdataset": _webdataset_shard}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_non_ascii_and_long_member_names_are_read(tmp_path, writer):
    shard = WRITERS[writer](tmp_path / "a.tar")
    source = ShardSource(str(shard))
    assert [source.member(i) for i in range(len(source))] == [f"{k}.jpg" for k in KEYS]
    for i in range(len(KEYS)):
        assert source.read(i, STORED).data.tobytes() == _jpeg(i)
    assert source.labels.tolist() == [0, 1, 2, 3]


def test_ustar_prefix_names_are_read(tmp_path):
    keys = ["d" * 120 + "/long", "plain"]
    source = ShardSource(str(_tarfile_shard(tmp_path / "a.tar", tarfile.USTAR_FORMAT, keys)))
    assert source.read(0, STORED).data.tobytes() == _jpeg(0) \
        and source.read(1, STORED).data.tobytes() == _jpeg(1)


def test_non_ascii_names_from_a_wds2idx_index_are_read(tmp_path):
    pytest.importorskip("wds2idx")
    shard = _webdataset_shard(tmp_path / "a.tar")
    subprocess.run([sys.executable, "-m", "wds2idx", str(shard)], check=True,
                   capture_output=True)
    assert (tmp_path / "a.idx").is_file()
    source = ShardSource(str(shard))
    assert [source.read(i, STORED).data.tobytes() for i in range(4)] == [_jpeg(i) for i in range(4)]


@pytest.mark.parametrize("writer", ["pax", "gnu"])
def test_a_shard_rewritten_with_other_long_names_is_caught(tmp_path, writer):
    shard = WRITERS[writer](tmp_path / "a.tar")
    source = ShardSource(str(shard))
    renamed = [k.replace("日本", "中国").replace("d" * 120, "e" * 120) for k in KEYS]
    _tarfile_shard(shard, tarfile.PAX_FORMAT if writer == "pax" else tarfile.GNU_FORMAT,
                   renamed)
    for i in (0, 2):
        with pytest.raises(FormatError, match="changed after it was indexed"):
            source.read(i, STORED)


def test_json_labels_with_long_captions_are_read_on_both_backends(tmp_path, backend):
    import webdataset as wds
    caption = "a long caption " * 1000  # 15 kB
    with wds.TarWriter(str(tmp_path / "a.tar")) as writer:
        for i in range(4):
            writer.write({"__key__": f"k{i}", "jpg": _jpeg(i),
                          "json": {"label": i % 2, "caption": caption}})
    source = ShardSource(str(tmp_path / "a.tar"))
    assert source.labels.tolist() == [0, 1, 0, 1]
    loader = make_loader("image", str(tmp_path / "a.tar"), backend=backend, batch_size=4,
                         size=32, shuffle=False)
    assert sorted(next(iter(loader))["label"].tolist()) == [0, 0, 1, 1]


def test_a_label_member_over_the_bound_is_an_error_naming_it(tmp_path):
    import webdataset as wds
    huge = {"label": 1, "caption": "x" * (17 << 20)}
    with wds.TarWriter(str(tmp_path / "a.tar")) as writer:
        writer.write({"__key__": "big", "jpg": _jpeg(0), "json": huge})
        writer.write({"__key__": "small", "jpg": _jpeg(1), "json": {"label": 0}})
    source = ShardSource(str(tmp_path / "a.tar"))
    with pytest.raises(FormatError, match=r"member big\.jpg: label member big\.json is "
                                          r"larger than 16 MiB"):
        source.read(0, STORED)
    assert source.read(1, STORED).data.tobytes() == _jpeg(1)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "other arrays"])
def test_a_damaged_cached_index_is_rebuilt_with_one_warning(tmp_path, damage):
    shard = _webdataset_shard(tmp_path / "a.tar")
    cached = Path(str(shard) + ".index.npz")
    load_index(str(shard))
    whole = cached.read_bytes()
    cached.write_bytes({"truncated": whole[:len(whole) // 2], "garbage": b"\x93NUMPY" * 50,
                        "empty": b"", "other arrays": _npz(labels=np.arange(3),
                                                           meta=json.loads("[3, 1, 1, 0, 0]"))
                        }[damage])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = load_index(str(shard))
    assert len(index) == 4 and index.labels.tolist() == [0, 1, 2, 3]
    assert len(caught) == 1 and f"{cached}: damaged shard index" in str(caught[0].message)
    assert cached.read_bytes() != b"" and len(load_index(str(shard))) == 4  # saved again


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()
