"""Shard indexes read from the `.idx` files DALI's own `wds2idx` tool writes (the one in the
nvidia-dali wheel, run as a program), and every way such a file can be wrong."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.formats.errors import FormatError
from dali_pipes.sources.protocol import STORED
from dali_pipes.sources.shards import ShardSource
from dali_pipes.stores.tar_index import build_index
from dali_pipes.stores.wds2idx import read_wds2idx, wds2idx_path
from tests.sources.shard_data import write_shards


def _wds2idx(shard: Path) -> Path:
    """Run DALI's tool on `shard`; return the index it wrote (its default name)."""
    pytest.importorskip("wds2idx")
    subprocess.run([sys.executable, "-m", "wds2idx", str(shard)], check=True,
                   capture_output=True)
    idx = shard.with_suffix(".idx")
    assert idx.is_file()
    return idx


@pytest.fixture
def shard(image_folder, tmp_path) -> Path:
    out = write_shards(image_folder, tmp_path / "wds", per_shard=8)
    (out / "train-000000.tar").rename(tmp_path / "one.tar")
    return tmp_path / "one.tar"


def _index(shard: Path):
    st = shard.stat()
    return build_index(str(shard), size=st.st_size, mtime_ns=st.st_mtime_ns)


def test_an_index_written_by_wds2idx_gives_the_tar_walks_index(shard):
    walked = _index(shard)
    idx = _wds2idx(shard)
    assert wds2idx_path(str(shard)) == str(idx)
    assert idx.read_text().splitlines()[0] == "v1.2 8"
    from_idx = _index(shard)
    for field in ("names", "name_ends", "offsets", "sizes", "labels"):
        assert np.array_equal(getattr(from_idx, field), getattr(walked, field)), field
    assert (from_idx.ignored, from_idx.truncated) == (0, False)
    # It is used, not just found: an offset moved by one block is caught by name.
    lines = idx.read_text().splitlines()
    fields = lines[1].split(" ")
    fields[1] = str(int(fields[1]) + 512)
    idx.write_text("\n".join([lines[0], " ".join(fields), *lines[2:]]) + "\n")
    with pytest.raises(FormatError, match=re.escape(f"{idx}: member {fields[3]}: the index "
                                                    f"does not describe {shard}")):
        _index(shard)


def test_shards_with_wds2idx_indexes_load_the_same_samples(image_folder, tmp_path):
    plain = ShardSource(write_shards(image_folder, tmp_path / "a", per_shard=10))
    folder = write_shards(image_folder, tmp_path / "b", per_shard=10)
    for tar in sorted(folder.glob("*.tar")):
        _wds2idx(tar)
    indexed = ShardSource(folder)
    assert len(indexed) == len(plain) == 37
    assert np.array_equal(indexed.labels, plain.labels)
    assert [indexed.member(i) for i in range(37)] == [plain.member(i) for i in range(37)]
    assert all(indexed.read(i, STORED).data.tobytes() == plain.read(i, STORED).data.tobytes()
               for i in (0, 17, 36))


def test_which_idx_files_are_looked_for(tmp_path):
    for name in ("a-0.tar", "a-0.idx", "b.0.tar", "b.idx", "c.tar", "c.tar.idx"):
        (tmp_path / name).write_bytes(b"")
    assert wds2idx_path(str(tmp_path / "a-0.tar")) == str(tmp_path / "a-0.idx")
    assert wds2idx_path(str(tmp_path / "b.0.tar")) is None  # b.idx: whose? not used
    assert wds2idx_path(str(tmp_path / "c.tar")) == str(tmp_path / "c.tar.idx")


def _bad(shard: Path, text: str) -> Path:
    idx = Path(str(shard) + ".idx")  # <shard>.idx is looked for too
    idx.write_text(text)
    return idx


def test_malformed_indexes_are_format_errors_naming_file_and_line(shard):
    size = shard.stat().st_size
    good = subprocess.run([sys.executable, "-m", "wds2idx", str(shard), "/dev/stdout"],
                          check=True, capture_output=True, text=True).stdout
    lines = good.splitlines()[-9:]  # the tool's progress lines come first on stdout
    assert lines[0] == "v1.2 8"
    cases = {
        "line 1: version: unsupported index version": ["v9.9 8", *lines[1:]],
        "line 1: sample count: not a positive integer": ["v1.2 eight", *lines[1:]],
        "line 1: the index says 9 samples but lists 8": ["v1.2 9", *lines[1:]],
        "line 3: 9 fields: members need four each": [lines[0], lines[1], lines[2] + " x",
                                                     *lines[3:]],
        "line 2: member .*: offset is no multiple of 512": [
            lines[0], re.sub(r" (\d+) ", lambda m: f" {int(m.group(1)) + 1} ", lines[1], count=1),
            *lines[2:]],
        "line 9: member .*: the member ends past the end of the shard": [
            *lines[:-1], re.sub(r" (\d+) (\d+) ", f" {size // 512 * 512} \\2 ", lines[-1],
                                count=1)],
    }
    for message, text in cases.items():
        idx = _bad(shard, "\n".join(text) + "\n")
        with pytest.raises(FormatError, match=re.escape(str(idx)) + ": " + message):
            read_wds2idx(str(idx), size)
        with pytest.raises(FormatError, match=re.escape(str(idx))):
            _index(shard)


def test_a_v1_1_index_without_names_is_not_used(shard):
    walked = _index(shard)
    _bad(shard, "v1.1 1\njpg 512 10 cls 1024 1\n")
    with pytest.warns(UserWarning, match=r"v1\.1 holds no member names"):
        got = _index(shard)
    assert np.array_equal(got.offsets, walked.offsets)
