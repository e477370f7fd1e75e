"""A block cache that cannot be written (its folder cannot be made, the disk is full) is
bypassed with one warning and reads still succeed; a short answer from the server is an
error naming the object and the range, never a short block in the cache."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from dali_pipes.sources.protocol import STORED
from dali_pipes.stores.remote import FsspecStore
from tests.stores.servers import RangeServer, served_file

BLOB = (np.arange(20000) * 13 % 251).astype(np.uint8)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path):
    with served_file(tmp_path / "srv", "blob.bin", BLOB.tobytes()) as found:
        yield found


def _store(cache_dir, **kw) -> FsspecStore:
    return FsspecStore(cache_dir=str(cache_dir), block_size=4096, retries=0, timeout=5.0,
                       **kw)


def test_a_cache_folder_that_cannot_be_made_is_bypassed_with_one_warning(served, tmp_path):
    _, url = served
    (tmp_path / "a-file").write_bytes(b"")
    cache = tmp_path / "a-file" / "cache"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = _store(cache)
        for offset in (0, 5000, 9000, 0):
            assert np.array_equal(store.read_range(url, offset, 3000),
                                  BLOB[offset:offset + 3000])
    assert [str(w.message).split(":")[0] for w in caught] == [str(cache)]


_FULL_DISK = textwrap.dedent("""
    import resource, sys, warnings
    from pathlib import Path
    import numpy as np
    sys.path.insert(0, {root!r})
    from dali_pipes.stores.remote import FsspecStore
    from tests.stores.servers import RangeServer
    blob = np.frombuffer(Path({data!r}, "blob.bin").read_bytes(), np.uint8)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.getrlimit(
        resource.RLIMIT_FSIZE)[1]))  # every file write past 1000 bytes fails (EFBIG)
    with RangeServer(Path({data!r})) as server, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        store = FsspecStore(cache_dir={cache!r}, block_size=4096, retries=0, timeout=5.0)
        for offset in (0, 5000, 9000, 0):
            got = store.read_range(server.url + "/blob.bin", offset, 3000)
            assert np.array_equal(got, blob[offset:offset + 3000]), offset
    print("warnings:", [str(x.message) for x in w])
""")


def test_a_full_disk_bypasses_the_cache_with_one_warning(tmp_path):
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "blob.bin").write_bytes(BLOB.tobytes())
    cache = tmp_path / "cache"
    script = _FULL_DISK.format(root=str(ROOT), data=str(tmp_path / "srv"), cache=str(cache))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(f"{cache}: the block cache cannot be written") == 1
    assert "File too large" in done.stdout and not list(cache.glob("*.blk"))


def test_a_short_answer_is_an_error_naming_the_range_and_is_not_cached(served, tmp_path):
    server, url = served
    store = _store(tmp_path / "cache")
    store.stat(url)
    server.faults["blob.bin"] += [("short", 10)]
    with pytest.raises(EOFError, match=re.escape(f"{url}: bytes 4096..8192 requested, got "
                                                 "4086")):
        store.read_range(url, 5000, 100)
    assert not list((tmp_path / "cache").glob("*.blk"))
    assert np.array_equal(store.read_range(url, 5000, 100), BLOB[5000:5100])


def test_shards_load_when_the_cache_dir_cannot_be_made(tmp_path):
    import webdataset as wds

    from dali_pipes.sources.shards import ShardSource
    (tmp_path / "srv").mkdir()
    with wds.TarWriter(str(tmp_path / "srv" / "a.tar")) as writer:
        for i in range(3):
            writer.write({"__key__": f"k{i}", "jpg": bytes([i]) * 5000, "cls": i})
    (tmp_path / "a-file").write_bytes(b"")
    with RangeServer(tmp_path / "srv") as server, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        source = ShardSource(f"{server.url}/a.tar",
                             store=FsspecStore(cache_dir=str(tmp_path / "a-file" / "cache")))
        assert [source.read(i, STORED).data.tobytes() for i in range(3)] == [bytes([i]) * 5000
                                                               for i in range(3)]
    assert len([x for x in w if "block cache cannot be written" in str(x.message)]) == 1
