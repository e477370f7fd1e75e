"""write_tensorboard() against the real tensorboard package: write, read the event file back."""
from __future__ import annotations

import pytest

from torch_bridge import make_loader
from torch_bridge.stats import write_tensorboard

pytest.importorskip("tensorboard")


def test_the_stats_reach_a_summary_writer(image_folder, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    loader = make_loader("image", image_folder, batch_size=8, size=24)
    written = []
    with SummaryWriter(log_dir=str(tmp_path)) as writer:
        for step, _ in enumerate(loader):
            written.append(loader.stats())
            write_tensorboard(writer, written[-1], step)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"loader/samples_per_s", "loader/wait_ms_p95", "loader/skipped",
            "loader/bytes_read", "loader/stage_ms/dali_run"} <= tags
    batches = events.Scalars("loader/batches")
    assert [e.step for e in batches] == list(range(len(loader)))
    assert [e.value for e in batches] == [s["batches"] for s in written]
    rate = events.Scalars("loader/samples_per_s")
    assert [e.value for e in rate] == pytest.approx([s["samples_per_s"] for s in written])
