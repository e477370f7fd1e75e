"""diagnose.py's timed steps take the data wait, samples, bytes and stages from loader.stats()."""
from argparse import Namespace

import pytest

from bench.diagnosis.loop import _timed_steps
from bench.run_one import endless
from torch_bridge import make_loader


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_timed_steps_read_the_loader_counters(image_folder, backend):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    loader = make_loader("image", image_folder, backend=backend, batch_size=8, size=24,
                         **extra)
    stream = endless(loader)
    next(stream)  # warm-up, outside the window
    before = loader.stats()["total"]
    args = Namespace(steps=7, backend=backend)  # 7 steps cross into the second epoch
    done = []
    loop = _timed_steps(loader, stream, lambda batch: None, args, lambda: None, done.append)
    after = loader.stats()["total"]
    assert done == list(range(1, 8)) and len(loop["wait_s"]) == 7
    # the counters plus the (no-op) sync after each next()
    assert sum(loop["wait_s"]) * 1e3 == pytest.approx(after["wait_ms"] - before["wait_ms"],
                                                      abs=0.5)
    assert loop["samples"] == after["samples"] - before["samples"] == 8 * 4 + 5 + 8 * 2
    assert loop["bytes_read"] > 0 and all(w >= 0 for w in loop["wait_s"])
    assert set(loop["stage_ms"]) == ({"feed", "dali_run", "transfer"} if backend == "dali"
                                     else {"fetch", "transfer", "finish"})
