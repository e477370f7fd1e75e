"""Loader.stats(): live counters of the pass in progress and the last one, on both backends."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import make_loader
from torch_bridge.stats import WAIT_RING, LoaderStats

STAGES = {"dali": {"feed", "dali_run", "transfer"}, "torch": {"fetch", "transfer", "finish"}}


def _loader(folder, backend, **kw):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader("image", folder, backend=backend, batch_size=8, size=24, **extra, **kw)


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    """20 good JPEGs and 2 that fail (one in the reader, one in the decoder)."""
    root = write_image_folder(tmp_path_factory.mktemp("stats_bad"), n_images=20, n_classes=2)
    good = (root / "class_0" / "img_0000.jpg").read_bytes()
    (root / "class_1" / "empty.jpg").write_bytes(b"")
    (root / "class_1" / "corrupt.jpg").write_bytes(undefined_quant_table(good))
    return root


def _check_pass(stats, loader, backend, *, batches, samples, skipped=0):
    assert stats["batches"] == batches and stats["samples"] == samples
    assert stats["skipped"] == skipped
    assert stats["samples_per_s"] > 0
    assert 0 <= stats["wait_ms_p50"] <= stats["wait_ms_p95"]
    assert set(stats["stage_ms"]) == STAGES[backend]
    assert all(v >= 0 for v in stats["stage_ms"].values())
    assert sum(stats["stage_ms"].values()) <= stats["wall_s"] * 1e3
    assert stats["wait_ms_total"] <= stats["wall_s"] * 1e3
    assert stats["queue_depth"] >= 0


def test_a_pass_is_counted_on_both_backends(image_folder, backend):
    loader = _loader(image_folder, backend, shuffle=False)
    assert loader.stats()["current"] is None and loader.stats()["last"] is None
    it = iter(loader)
    first = next(it)
    live = loader.stats()
    assert live["current"] is not None and live["current"]["batches"] == 1
    assert live["samples"] == len(first["index"]) and not live["finished"]
    for _ in it:
        pass
    stats = loader.stats()
    assert stats["current"] is None and stats["last"]["finished"]
    _check_pass(stats, loader, backend, batches=len(loader), samples=37)
    sizes = sum(p.stat().st_size for p in image_folder.rglob("*.jpg"))
    assert stats["bytes_read"] == sizes  # every file read once in the pass
    if backend == "dali":
        assert stats["queue_depth"] >= 1  # batches prepared or running ahead


def test_skipped_samples_are_those_of_the_pass(bad_folder, backend):
    loader = _loader(bad_folder, backend, on_error="skip")
    for epoch in range(2):
        before = len(loader.skipped)
        n = sum(len(b["index"]) for b in loader)
        stats = loader.stats()
        assert stats["skipped"] == len(loader.skipped) - before == 2, epoch
        _check_pass(stats, loader, backend, batches=stats["batches"], samples=n, skipped=2)
        assert n == 20 and stats["epoch"] == epoch


def test_second_pass_and_resume_keep_current_and_last_apart(image_folder, backend):
    loader = _loader(image_folder, backend)
    for _ in loader:
        pass
    it = iter(loader)
    for _ in range(2):
        next(it)
    state = loader.state_dict()
    stats = loader.stats()
    assert stats["current"]["epoch"] == 1 and stats["current"]["batches"] == 2
    assert stats["last"]["epoch"] == 0 and stats["last"]["batches"] == len(loader)
    assert stats["batches"] == 2  # the top level is the pass in progress
    assert stats["total"]["batches"] == len(loader) + 2
    assert stats["total"]["samples"] == 37 + stats["samples"]
    del it
    resumed = _loader(image_folder, backend)
    resumed.load_state_dict(state)
    rest = list(resumed)
    stats = resumed.stats()
    assert stats["last"]["start_batch"] == 2 and stats["epoch"] == 1
    _check_pass(stats, resumed, backend, batches=len(rest),
                samples=sum(len(b["index"]) for b in rest))
    assert stats["batches"] == len(resumed) - 2


def test_log_every_writes_one_line_per_n_batches(image_folder, backend, caplog):
    loader = _loader(image_folder, backend, log_every=2)
    with caplog.at_level(logging.INFO, logger="torch_bridge"):
        for _ in range(2):
            for _ in loader:
                pass
    lines = [r for r in caplog.records if r.name == "torch_bridge"]
    assert len(loader) == 5 and len(lines) == 2 * (5 // 2)
    assert "samples/s" in lines[0].getMessage() and "epoch 1 batch 4" in lines[-1].getMessage()


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_log_every_must_be_a_positive_int(image_folder, value):
    with pytest.raises(ValueError, match="log_every"):
        _loader(image_folder, "dali", log_every=value)


def test_the_wait_ring_is_bounded_and_disabled_counts_nothing():
    stats = LoaderStats()
    run = stats.begin(0, 0, 0)
    for i in range(WAIT_RING + 10):
        stats.batch(1_000_000 if i < 10 else 3_000_000)  # the oldest ten are overwritten
    assert run.waits.shape == (WAIT_RING,)
    assert stats.snapshot(0)["wait_ms_p50"] == pytest.approx(3.0)
    assert stats.snapshot(0)["batches"] == WAIT_RING + 10
    off = LoaderStats(enabled=False)
    assert off.begin(0, 0, 0) is None
    off.batch(5)
    off.add("feed", 5)
    assert off.snapshot(0)["batches"] == 0 and off.snapshot(0)["current"] is None
    assert np.isfinite(off.snapshot(0)["samples_per_s"])


def test_bytes_read_is_none_where_the_source_lists_no_sizes(tiny_data):
    data = tiny_data("hyperspectral")
    loader = data.loader("dali")
    batches = list(loader)
    stats = loader.stats()
    assert stats["bytes_read"] is None and stats["total"]["bytes_read"] is None
    assert stats["batches"] == len(batches) == len(loader) and stats["samples_per_s"] > 0


def test_a_pass_stats_only_the_files_it_yielded(image_folder):
    """Bytes of a lazily stat'ed listing are counted by stat'ing the yielded samples'
    files, not the whole listing (a first batch of a million-file set stays quick)."""
    loader = _loader(image_folder, "dali", shuffle=False)
    it = iter(loader)
    first = next(it)
    it.close()
    stats = loader.stats()
    listing = loader._engine.modality.source.listing
    assert not listing.stats.taken
    want = sum(os.path.getsize(loader.path(int(i))) for i in first["index"])
    assert stats["bytes_read"] == want
