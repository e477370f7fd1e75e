"""The conformance suite of the `Store` seam (dali_pipes.stores.Store), shipped with the
interface: a store is proven by one small subclass that says how to put an object where the
store reads it (tests/stores/test_store_conformance.py: local files, HTTP, S3).

Subclasses name their class `Test...` so pytest collects them, and define the fixture
`put`: `put(name, data: bytes) -> str`, the path or URL the store reads the object at
(`name` may hold "/": folders; writing it again replaces it), and `store()`: the store under
test. A store that cannot list folders (a web server) sets `lists = False`: its listing
tests then check that `list` says so.
"""
from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

from dali_pipes.stores import Store

PAYLOAD = bytes(range(256)) * 40 + b"tail"  # 10,244 bytes, no two neighbours alike


class StoreTests:
    """The behaviour every store shares (see `dali_pipes.stores.Store`)."""

    # seconds between two writes of one object for its version to change (a server whose
    # only validator is Last-Modified has whole seconds)
    rewrite_delay = 0.0
    lists = True  # whether `list` lists folders (False: it raises ValueError, saying why)

    def store(self) -> Store:
        """A new store reading where `put` writes."""
        raise NotImplementedError

    def test_is_a_store(self):
        assert isinstance(self.store(), Store)
        assert isinstance(self.store().supports_listing, bool)

    def test_list_gives_every_object_under_a_folder_with_size_and_version(self, put):
        paths = [put(name, PAYLOAD[:n]) for name, n in
                 (("lst/b.bin", 7), ("lst/a.bin", 100), ("lst/sub/c.bin", 0),
                  ("lst/sub/deeper/d.bin", 5), ("lstx/e.bin", 3))]
        folder = paths[0].rsplit("/", 1)[0]
        store = self.store()
        if not self.lists:
            with pytest.raises(ValueError):
                store.list(folder)
            return
        listed = store.list(folder)
        assert [tuple(e)[0] for e in listed] == sorted(paths[:4])  # not lstx/: another folder
        for path, size, version in listed:
            assert (size, version) == tuple(self.store().stat(path))
            assert isinstance(size, int) and isinstance(version, int)

    def test_a_listed_object_reads_with_its_listed_stat(self, put):
        path = put("listed/a.bin", PAYLOAD)
        store = self.store()
        stat = store.stat(path)
        if self.lists:
            stat = next((size, version) for name, size, version in
                        store.list(path.rsplit("/", 1)[0]) if name == path)
        got = store.read_range(path, 5, 300, stat)
        assert got.tobytes() == PAYLOAD[5:305]

    def test_stat_gives_the_size_and_an_int_version(self, put):
        size, version = self.store().stat(put("a.bin", PAYLOAD))
        assert size == len(PAYLOAD) and isinstance(version, int)

    @pytest.mark.parametrize("offset,count", [(0, 10), (3, 1), (256, 4096), (10_240, 4),
                                              (0, 10_244), (5, 0)])
    def test_read_range_gives_exactly_those_bytes(self, put, offset, count):
        got = self.store().read_range(put("a.bin", PAYLOAD), offset, count)
        assert isinstance(got, np.ndarray) and got.dtype == np.uint8
        assert got.tobytes() == PAYLOAD[offset:offset + count]

    def test_a_range_past_the_end_is_an_eof_error_naming_the_object(self, put):
        path = put("short.bin", PAYLOAD[:100])
        with pytest.raises(EOFError, match="short.bin"):
            self.store().read_range(path, 90, 20)

    def test_a_missing_object_is_an_os_error_naming_it(self, put):
        missing = put("there.bin", b"x").replace("there.bin", "missing.bin")
        with pytest.raises(OSError, match="missing.bin"):
            self.store().stat(missing)

    def test_open_reads_the_whole_object(self, put):
        with self.store().open(put("a.bin", PAYLOAD)) as f:
            assert f.read() == PAYLOAD

    def test_the_version_changes_when_the_object_does(self, put):
        """Same size, other bytes: a new version (what resume and the caches key on)."""
        path = put("v.bin", PAYLOAD)
        before = self.store().stat(path)[1]
        time.sleep(self.rewrite_delay)
        put("v.bin", PAYLOAD[::-1])
        assert self.store().stat(path)[1] != before  # a new store: no remembered stat

    def test_a_pickled_store_reads_the_same(self, put):
        path = put("a.bin", PAYLOAD)
        copy = pickle.loads(pickle.dumps(self.store()))
        assert copy.read_range(path, 7, 9).tobytes() == PAYLOAD[7:16]
