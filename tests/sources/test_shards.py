"""ShardSource and its tar indexes on shards written by the real `webdataset` package:
naming, labels, caching, and every kind of bad shard."""
from __future__ import annotations

import os
import re
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.sample_data.sample_images import encode_jpeg, photo_like
from dali_pipes.sources.protocol import STORED
from dali_pipes.sources.shard_names import expand_braces, is_shard_data, shard_sources
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.tar_index import load_index
from torch_bridge import SampleError, make_loader


def _jpeg(seed: int) -> bytes:
    return encode_jpeg(photo_like(np.random.default_rng(seed), 40, 48))


def _write(path: Path, samples: list[dict]) -> Path:
    import webdataset as wds
    with wds.TarWriter(str(path)) as writer:
        for sample in samples:
            writer.write(sample)
    return path


def _samples(n: int, start: int = 0) -> list[dict]:
    return [{"__key__": f"k{i:04d}", "jpg": _jpeg(i), "cls": i % 3}
            for i in range(start, start + n)]


def test_brace_patterns_expand_like_webdataset():
    assert expand_braces("a-{000..002}.tar") == ["a-000.tar", "a-001.tar", "a-002.tar"]
    assert expand_braces("{x,y}-{8..10}.tar") == ["x-8.tar", "x-9.tar", "x-10.tar",
                                                  "y-8.tar", "y-9.tar", "y-10.tar"]
    with pytest.raises(ValueError, match="backwards"):
        expand_braces("a-{3..1}.tar")


def test_listing_labels_paths_and_sources(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    _write(one / "a.tar", _samples(3)), _write(one / "b.tar", _samples(2, 3))
    _write(two / "c.tar", [{"__key__": "z", "png": b"", "json": {"label": 7}}])
    assert is_shard_data(one) and is_shard_data([one, two]) and not is_shard_data(tmp_path)
    (tmp_path / "stray.tar").write_bytes(b"")  # beside class folders: still class folders
    assert not is_shard_data(tmp_path)
    source = ShardSource(one)
    assert len(source) == 5 and source.labels.tolist() == [0, 1, 2, 0, 1]
    assert source.path(3) == f"{one / 'b.tar'}:k0003.jpg"
    assert source.read(4, STORED).data.tobytes() == _jpeg(4)
    assert not source.multi_source and source.classes == ("0", "1", "2")
    both = ShardSource([one, two])
    assert both.multi_source and both.source_ids.tolist() == [0] * 5 + [1]
    assert both.labels[-1] == 7 and both.member(5) == "z.png"
    assert len(shard_sources([one / "a.tar", one / "b.tar"])) == 1
    with pytest.raises(ValueError, match="not both"):
        shard_sources([one, one / "a.tar"])
    with pytest.raises(FileNotFoundError, match="nope-1.tar"):
        ShardSource(str(one / "nope-{1..2}.tar"))


def test_index_is_cached_and_rebuilt_when_the_shard_changes(tmp_path):
    shard = _write(tmp_path / "a.tar", _samples(3))
    first = load_index(str(shard))
    cached = Path(str(shard) + ".index.npz")
    assert cached.exists() and len(load_index(str(shard))) == 3
    _write(shard, _samples(5))
    os.utime(shard, ns=(first.shard_mtime_ns + 10**9, first.shard_mtime_ns + 10**9))
    assert len(load_index(str(shard))) == 5  # stale by size and mtime: rebuilt


def test_index_goes_to_index_dir_when_it_cannot_be_written_beside_the_shard(tmp_path):
    shard = _write(tmp_path / "a.tar", _samples(2))
    Path(str(shard) + ".index.npz").mkdir()  # in the way (as a read-only folder would be)
    assert len(ShardSource(tmp_path, index_dir=str(tmp_path / "idx"))) == 2
    assert next(p.name for p in (tmp_path / "idx").iterdir()).startswith("a.tar.")


def test_shard_changed_after_indexing_is_an_error_naming_shard_and_member(tmp_path):
    shard = _write(tmp_path / "a.tar", _samples(3))
    source = ShardSource(tmp_path)
    _write(shard, [{"__key__": "other", "jpg": _jpeg(9) * 2, "cls": 0}] + _samples(2))
    with pytest.raises(FormatError, match=re.escape(f"{shard}: member k0000.jpg: the shard "
                                                    "changed after it was indexed")):
        source.read(0, STORED)


def test_member_without_label_is_a_sample_error_or_a_skip(tmp_path):
    samples = _samples(4)
    del samples[1]["cls"]
    samples[2]["cls"] = b"seven"
    _write(tmp_path / "a.tar", samples)
    loader = make_loader("image", tmp_path, batch_size=4, size=16, shuffle=False)
    with pytest.raises(SampleError, match=r"sample 1 \(.*a\.tar:k0001\.jpg\).*no label member"):
        list(loader)
    loader = make_loader("image", tmp_path, batch_size=4, size=16, shuffle=False,
                         on_error="skip", backend="torch", reference={"num_workers": 0})
    assert [i for b in loader for i in b["index"].tolist()] == [0, 3]
    reasons = [s.reason for s in loader.skipped]
    assert "no label member" in reasons[0] and "not an integer" in reasons[1]


def test_duplicate_keys_name_the_shard_and_member(tmp_path):
    _write(tmp_path / "a.tar", _samples(2) + _samples(1))
    with pytest.raises(FormatError, match=r"a\.tar: member k0000\.\w+: duplicate key"):
        ShardSource(tmp_path / "a.tar")
    _write(tmp_path / "b.tar", _samples(1) + _samples(1))
    with pytest.raises(FormatError, match=r"b\.tar: member k0000\.\w+: duplicate member"):
        ShardSource(tmp_path / "b.tar")


def test_truncated_shard_warns_and_its_cut_member_fails_by_name(tmp_path):
    shard = _write(tmp_path / "a.tar", _samples(4))
    whole = ShardSource(shard)
    cut = int(whole.offsets[2]) + 100  # inside the third image
    shard.write_bytes(shard.read_bytes()[:cut])
    with pytest.warns(UserWarning, match="truncated shard"):
        source = ShardSource(shard)
    assert len(source) == 3
    assert source.read(1, STORED).data.tobytes() == _jpeg(1)
    with pytest.raises(FormatError, match=r"a\.tar: member k0002\.jpg: truncated shard"):
        source.read(2, STORED)


def test_a_file_that_is_no_tar_is_named(tmp_path):
    (tmp_path / "bad.tar").write_bytes(b"not a tar at all" * 64)
    with pytest.raises(FormatError, match=r"bad\.tar: tar header: not a tar file"):
        ShardSource(tmp_path / "bad.tar")


def test_members_that_are_neither_image_nor_label_are_counted(tmp_path):
    samples = _samples(2)
    samples[0]["txt"] = "a caption"
    _write(tmp_path / "a.tar", samples)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = ShardSource(tmp_path)
    assert len(source) == 2 and source.ignored == 1
    assert tarfile.is_tarfile(tmp_path / "a.tar")


def test_jpeg2000_members_are_images_on_both_backends(tmp_path):
    import io

    from PIL import Image
    pixels = photo_like(np.random.default_rng(3), 40, 48)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG2000", irreversible=False)
    _write(tmp_path / "a.tar", [{"__key__": "k0", "jp2": out.getvalue(), "cls": 1},
                                *_samples(1, start=1)])
    source = ShardSource(tmp_path)
    assert len(source) == 2 and source.ignored == 0
    batches = [next(iter(make_loader("image", tmp_path, backend=b, batch_size=2, size=32,
                                     train=False, shuffle=False))) for b in ("dali", "torch")]
    assert batches[0]["label"].tolist() == batches[1]["label"].tolist() == [1, 1]
    assert float((batches[0]["image"] - batches[1]["image"]).abs().mean()) < 0.1
