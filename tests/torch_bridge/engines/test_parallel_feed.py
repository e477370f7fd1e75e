"""config py_num_workers > 0: feeds prepared in worker processes (torch_bridge.engines._feeders).

Every check compares against py_num_workers = 0 on the same data: batches, skips, the
guard's known-bad samples, errors, resume; and that no worker process outlives its loader.
"""
from __future__ import annotations

import gc
import os
import pickle
import signal
import subprocess
import sys
import threading

import av
import numpy as np
import psutil
import pytest
import torch

from dali_pipes.sample_data.sample_fusion import small_fusion_folder
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from dali_pipes.sample_data.sample_video import small_video_folder
from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import SampleError, make_loader
from torch_bridge.engines._feeders import FeedPool, PlanBatch
from torch_bridge.engines._workers import start_method
from torch_bridge.errors import SampleGuard
from torch_bridge.modalities.fusion import FusionModality
from torch_bridge.modalities.hyperspectral import HyperspectralModality
from torch_bridge.modalities.video import VideoModality

pytest.importorskip("spectral")
VIDEO = {"batch_size": 2, "clip_length": 4, "stride": 2, "size": None}
OPTIONS = {"hyperspectral": {"batch_size": 16, "patch_size": 3}, "video": VIDEO,
           "fusion": {**VIDEO, "imu_offset": 0.25}, "image": {"batch_size": 6, "size": 24}}
MODALITIES = {"hyperspectral": HyperspectralModality, "video": VideoModality,
              "fusion": FusionModality}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel")
    small_scene_folder(root / "hsi", lines=8, samples=9, bands=4)
    small_video_folder(root / "vp9", n_videos=5, size=(32, 24))
    small_fusion_folder(root / "fusion", n_videos=4)
    if "libx264" in av.codecs_available:  # H.264: decoded by the PyAV fallback on the CPU
        small_video_folder(root / "h264", n_videos=3, size=(32, 24), codec="libx264")
        small_video_folder(root / "h264", n_videos=1, size=(32, 24), seed=4)  # one VP9
    return root


def _loader(modality, path, workers, **kw):
    kw = {**OPTIONS[modality], **kw}
    return make_loader(modality, path, config={"py_num_workers": workers}, **kw)


def _epochs(loader, n=2):
    """n passes (the second fed by running ahead at the end of the first)."""
    return [[{k: v.clone() for k, v in b.items()} for b in loader] for _ in range(n)]


def _assert_same(a, b):
    assert [len(e) for e in a] == [len(e) for e in b]
    for x, y in zip((x for e in a for x in e), (y for e in b for y in e), strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert torch.equal(x[k], y[k]), k


def _children():
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.parametrize("modality,folder", [("hyperspectral", "hsi"), ("video", "vp9"),
                                             ("video", "h264"), ("fusion", "fusion")])
def test_two_workers_give_the_batches_of_none(data, modality, folder):
    if not (data / folder).exists():
        pytest.skip("PyAV has no libx264 encoder")
    before = _children()
    serial, parallel = (_loader(modality, data / folder, n, seed=7) for n in (0, 2))
    expected = _epochs(serial)
    got = _epochs(parallel)
    assert len(_children() - before) == 2  # the two feed workers
    _assert_same(expected, got)
    parallel.close()
    assert _children() - before == set()


def test_resume_mid_epoch_with_workers(data):
    full = _epochs(_loader("hyperspectral", data / "hsi", 0, seed=2), 1)[0]
    loader = _loader("hyperspectral", data / "hsi", 2, seed=2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    resumed = _loader("hyperspectral", data / "hsi", 2, seed=2)
    resumed.load_state_dict(loader.state_dict())
    _assert_same([full[3:]], _epochs(resumed, 1))
    loader.close()
    resumed.close()


def _corrupt_videos(root, n_videos=6, bad="vid_0001.webm"):
    """Class 1 holds the odd-numbered files, listed after class 0's."""
    small_video_folder(root, n_videos=n_videos, n_classes=2, size=(32, 24))
    path = root / "class_1" / bad
    path.write_bytes(path.read_bytes()[:40])
    return root


def test_skip_records_and_known_bad_match(tmp_path):
    """Epoch 1's batches are sent to the workers before epoch 0 finds the bad file; the one
    holding it is prepared again, so its skip is recorded without reading the file."""
    root = _corrupt_videos(tmp_path / "v")
    loaders = [_loader("video", root, n, on_error="skip", seed=1) for n in (0, 2)]
    results = [_epochs(loader, 3) for loader in loaders]
    _assert_same(*results)
    serial, parallel = loaders
    assert [(s.index, s.epoch) for s in parallel.skipped] == [(3, 0), (3, 1), (3, 2)]
    assert parallel.skipped == serial.skipped
    assert parallel._guard.known_bad == serial._guard.known_bad and 3 in serial._guard.known_bad
    parallel.close()


def test_raise_names_file_and_index_after_the_same_batches(tmp_path):
    """Index 6 is in plan batch 3, prepared (prefetch depth 2) before batch 1 is yielded;
    its error is raised at its turn, naming the epoch, after batches 0-2."""
    root = _corrupt_videos(tmp_path / "v", n_videos=8, bad="vid_0005.webm")
    yielded = []
    for workers in (0, 2):
        loader = _loader("video", root, workers, on_error="raise", shuffle=False)
        batches = []
        with pytest.raises(SampleError, match=r"sample 6 \(.*vid_0005\.webm\)") as info:
            for batch in loader:
                batches.append(batch["index"].tolist())
        assert info.value.index == 6 and info.value.path.endswith("vid_0005.webm")
        yielded.append(batches)
        loader.close()
    assert yielded[0] == yielded[1] == [[0, 1], [2, 3], [4, 5]]


def test_decoder_failure_blame_matches(tmp_path):
    """A JPEG only DALI's decoder rejects: the batch is blamed sample by sample in the main
    process, and the pass goes on identically with and without workers."""
    root = write_image_folder(tmp_path / "img", n_images=14, n_classes=2)
    good = (root / "class_0" / "img_0000.jpg").read_bytes()
    (root / "class_1" / "corrupt.jpg").write_bytes(undefined_quant_table(good))
    loaders = [_loader("image", root, n, on_error="skip", seed=4) for n in (0, 2)]
    results = [_epochs(loader, 2) for loader in loaders]
    _assert_same(*results)
    assert loaders[1].skipped == loaders[0].skipped and len(loaders[0].skipped) == 2
    loaders[1].close()


def test_no_worker_outlives_del(data):
    before = _children()
    loader = _loader("hyperspectral", data / "hsi", 2)
    next(iter(loader))
    assert len(_children() - before) == 2
    del loader
    gc.collect()
    assert _children() - before == set()


def test_a_killed_worker_fails_the_pass_and_the_next_starts_afresh(data):
    expected = _epochs(_loader("hyperspectral", data / "hsi", 0, seed=5), 2)[1]
    loader = _loader("hyperspectral", data / "hsi", 2, seed=5)
    it = iter(loader)
    next(it)
    os.kill(loader._engine._pool.pids()[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="feed worker process died"):
        for _ in range(5):  # the pool stays broken: a batch of this pass or a later one fails
            for _ in it:
                pass
            it = iter(loader)
    loader.set_epoch(1)
    _assert_same([expected], _epochs(loader, 1))
    loader.close()


def test_workers_end_with_the_interpreter(data):
    """A script that never closes its loader: its workers exit with it."""
    script = (f"from torch_bridge import make_loader\n"
              f"loader = make_loader('hyperspectral', {str(data / 'hsi')!r}, patch_size=3, "
              f"config={{'py_num_workers': 2}})\n"
              f"next(iter(loader))\n"
              f"print(loader._engine._pool.pids(), flush=True)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.strip().strip("[]").split(",")]
    assert len(pids) == 2 and not any(psutil.pid_exists(p) for p in pids)


@pytest.mark.parametrize("modality,folder", [("hyperspectral", "hsi"), ("video", "vp9"),
                                             ("fusion", "fusion")])
def test_modalities_pickle_for_forkserver_and_spawn(data, modality, folder):
    options = {k: v for k, v in OPTIONS[modality].items() if k != "batch_size"}
    mod = MODALITIES[modality](data / folder, seed=0, **options)
    indices = np.arange(3, dtype=np.int64)
    mod.feeds(0, indices, SampleGuard("raise"))  # opens maps, probes files, caches streams
    copy = pickle.loads(pickle.dumps(mod))
    a, kept_a = mod.feeds(0, indices, SampleGuard("raise"))
    b, kept_b = copy.feeds(0, indices, SampleGuard("raise"))
    assert np.array_equal(kept_a, kept_b) and a.keys() == b.keys()
    for k in a:  # remuxed segments ("video") hold a random Matroska segment id
        same = (lambda x, y: len(x) == len(y)) if k == "video" else np.array_equal
        assert all(same(x, y) for x, y in zip(a[k], b[k], strict=True)), k


def test_forkserver_pool_prepares_the_same_feeds(data):
    """What the engine uses once CUDA is initialised: the modality pickled into workers."""
    mod = HyperspectralModality(data / "hsi", seed=0, patch_size=3)
    indices = np.array([5, 0, 9], dtype=np.int64)
    pool = FeedPool(mod, "raise", 1, context="forkserver")
    try:
        prepared, new_bad = pool.result(pool.submit(PlanBatch(1, 0, indices, indices), {}))
    finally:
        pool.close()
    here, kept_here = mod.feeds(1, indices, SampleGuard("raise"))
    assert pool.method == "forkserver" and np.array_equal(prepared.kept, kept_here)
    assert prepared.skips == () and new_bad == {}
    assert all(np.array_equal(prepared.feeds[k], here[k]) for k in here)


def test_an_unpicklable_modality_fails_with_advice():
    with pytest.raises(RuntimeError, match=r"'forkserver'.*must be picklable.*py_num_workers=0"):
        FeedPool(threading.Lock(), "raise", 1, context="forkserver")


def test_start_method_forks_only_while_cuda_is_not_initialised():
    assert start_method(cuda_in_use=True) in ("forkserver", "spawn")
    expected = "forkserver" if torch.cuda.is_initialized() else "fork"
    assert start_method() == expected


def test_reference_workers_get_the_start_method_when_they_start(data):
    loader = make_loader("hyperspectral", data / "hsi", backend="torch", patch_size=3,
                         reference={"num_workers": 1})
    dataloader = loader._engine.loader
    assert dataloader.multiprocessing_context is None  # not chosen yet
    next(iter(loader))
    assert dataloader.multiprocessing_context.get_start_method() == start_method()
    loader.close()


@pytest.mark.gpu
def test_cuda_workers_use_forkserver_and_match(data):
    serial, parallel = (_loader("video", data / "vp9", n, seed=3, device="cuda")
                        for n in (0, 2))
    expected, got = _epochs(serial), _epochs(parallel)
    assert parallel._engine._pool.method in ("forkserver", "spawn")
    _assert_same(expected, got)
    parallel.close()
