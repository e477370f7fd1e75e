"""A store the user hands in (`make_loader(..., store=...)`): a wrapper of the library's
LocalStore, written as a user would, over the plain local paths, carries the listing and
every read and gives the plain local loader's batches; what the entrance refuses."""
from __future__ import annotations

import os

import pytest

from dali_pipes.stores.local import LocalStore
from dali_pipes.stores.select import StatFree, resolve_store
from tests.stores.user_stores import DictStore
from torch_bridge.testing.loader_contract import assert_same, copies


class LoggingStore:
    """LocalStore wrapped: every call appends a line to a log file (a file, so the reads of
    forked workers count too)."""

    supports_listing = True

    def __init__(self, log):
        self.log, self.local = os.fspath(log), LocalStore()

    def _note(self, what: str, path: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{what} {path}\n")

    def list(self, prefix):
        self._note("list", prefix)
        return self.local.list(prefix)

    def stat(self, path):
        self._note("stat", path)
        return self.local.stat(path)

    def read_range(self, path, offset, size, stat=None):
        self._note("read", path)
        return self.local.read_range(path, offset, size, stat)

    def open(self, path):
        self._note("open", path)
        return self.local.open(path)


@pytest.mark.parametrize("kind", ["image", "video", "hyperspectral", "arrays"])
def test_a_wrapped_local_store_carries_every_listing_and_read(kind, backend, tiny_data,
                                                               tmp_path):
    tiny = tiny_data(kind)
    want = copies(tiny.loader(backend, seed=3))
    log = tmp_path / "calls.log"
    got = copies(tiny.loader(backend, seed=3, store=LoggingStore(log)))
    assert_same(got, want)
    calls = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert ["list", str(tiny.one)] in calls
    read = {path for what, path in calls if what == "read"}
    loader = tiny.loader(backend, store=LoggingStore(tmp_path / "again.log"))
    samples = {loader.path(int(i)) for b in got for i in b["index"]}
    assert read and all(p.startswith(str(tiny.one)) for p in read)
    assert samples <= read, sorted(samples - read)[:3]


def test_a_store_whose_read_range_takes_no_stat_is_called_without_it(tiny_data, tmp_path):
    class Plain(DictStore):
        def read_range(self, path, offset, size):  # as a user might write it
            return super().read_range(path, offset, size)

    store = resolve_store("mem/x", Plain())
    assert isinstance(store, StatFree)
    store.store.put("mem/x/a.bin", b"0123456789")
    assert store.read_range("mem/x/a.bin", 2, 3, (10, 1)).tobytes() == b"234"


def test_the_entrance_refuses_what_it_cannot_honour(tiny_data):
    tiny = tiny_data("image")
    with pytest.raises(TypeError, match=r"lacks read_range, open"):
        tiny.loader("dali", store=type("Half", (), {"list": lambda s, p: [],
                                                    "stat": lambda s, p: (0, 0)})())
    with pytest.raises(ValueError, match="with store= give them to your store"):
        tiny.loader("dali", store=DictStore(), cache_dir="/tmp/x")
    with pytest.raises(ValueError, match="store= reads data named by paths"):
        resolve_store(object(), DictStore())
