"""compare.py --modality video --peers: torchcodec and PyAV rows over the clips of our plan
(bench/peers_video.py), on a tiny set of real H.264 files."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.compare import peer_rows
from bench.peers_video import VIDEO_PEERS, unavailable, video_peer_loader
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources.video import VideoFolderSource

ROOT = Path(__file__).resolve().parents[2]
CLIPS = {"clip_length": 4, "stride": 2}


@pytest.fixture(scope="module")
def h264(tmp_path_factory) -> Path:
    """4 H.264 MP4 clips of 64x48, 24-40 frames, in 2 classes."""
    return small_video_folder(tmp_path_factory.mktemp("h264") / "v", n_videos=4, n_classes=2,
                              frames=(24, 40, 31), size=(64, 48), codec="libx264")


def test_video_peers_are_rows_and_unknown_names_are_refused():
    lines: list[str] = []
    rows = peer_rows("video", "all", lines.append)
    assert "pyav" in rows  # PyAV is a dependency
    assert sorted(rows + [line.split()[1] for line in lines]) == sorted(VIDEO_PEERS)
    assert unavailable("ffcv").startswith("unknown video peer 'ffcv'")
    with pytest.raises(SystemExit, match="unknown ffcv for --modality video; expected "
                                         "'all' or some of torchcodec, pyav"):
        peer_rows("video", "pyav,ffcv", lines.append)
    with pytest.raises(ValueError, match="video peers take only .* not pad"):
        video_peer_loader("pyav", ".", batch_size=2, options={"pad": "variable"})


@pytest.mark.parametrize("peer", VIDEO_PEERS)
def test_peer_batches_hold_the_frames_of_our_plan(h264, peer):
    if unavailable(peer):
        pytest.skip(unavailable(peer))
    loader = video_peer_loader(peer, h264, batch_size=3, size=16, num_workers=0,
                               options={**CLIPS, "decode_threads": 1})
    source = VideoFolderSource(h264, **CLIPS)
    for epoch in range(2):  # each pass over the loader is the plan's next epoch
        batch = next(iter(loader))
        assert batch["frames"].shape == (3, 4, 3, 16, 16)
        assert batch["frames"].dtype.is_floating_point and batch["frames"].std() > 0.1
        for row, index in enumerate(batch["index"].tolist()):
            frames = source.clip_frames(0, epoch, index, train=True)
            np.testing.assert_allclose(batch["timestamps"][row].numpy(),
                                       source.timestamps(index, frames), atol=1e-6)
            assert batch["label"][row] == source.labels[index]


def test_compare_runs_the_video_peers(h264, tmp_path, capsys):
    """compare.py's main here (this process has imported torch and the peers already); each
    row is measured in its own child process (bench/run_one.py) as on the command line,
    which test_compare_refuses_bad_options runs."""
    from bench import compare
    out = tmp_path / "r.json"
    code = compare.main(
        ["--modality", "video", "--data", str(h264), "--backends", "pyav",
         "--peers", "pyav,torchcodec", "--options", json.dumps(CLIPS), "--batch-size", "2",
         "--steps", "2", "--warmup", "1", "--size", "16", "--device", "cpu",
         "--repeats", "1", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    report = json.loads(out.read_text())
    assert report["settings"]["options"] == CLIPS
    results = {r["backend"]: r for r in report["results"]}
    expected = {"pyav"} | ({"torchcodec"} if unavailable("torchcodec") is None else set())
    assert set(results) == expected
    for row in results.values():
        assert row["samples"] == 4 and row["cpu_ms_per_sample"] > 0
        assert row["samples_per_s"] > 0 and row["peak_rss_mb"] > 0
    table = [line.split()[0] for line in printed.out.splitlines() if line.strip()]
    assert set(results) <= set(table)  # a row of the printed table each
    if "torchcodec" not in results:
        assert printed.err.count("skipped: torchcodec") == 1


def test_compare_refuses_bad_options():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--modality", "video",
         "--options", "[16]"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--options: a JSON object is needed" in proc.stderr


def test_pyav_scales_a_clip_with_one_reformatter(h264, monkeypatch):
    """One swscale context per clip (PyAV's reusable VideoReformatter), not one per frame as
    `frame.to_ndarray(width=, height=)` makes; the pixels are those of the per-frame way."""
    import av

    from bench import peers_video
    made = []
    real = peers_video.VideoReformatter

    def counted():
        made.append(real())
        return made[-1]

    monkeypatch.setattr(peers_video, "VideoReformatter", counted)
    path = str(sorted(h264.rglob("*.mp4"))[0])
    frames = np.array([3, 5, 7, 9])
    clip, times = peers_video.decode_pyav(path, frames, (16, 16))
    assert len(made) == 1 and clip.shape == (4, 3, 16, 16)
    with av.open(path) as container:
        every = [f.to_ndarray(width=16, height=16, format="rgb24")
                 for f in container.decode(video=0)]
    np.testing.assert_array_equal(clip.permute(0, 2, 3, 1).numpy(), np.stack(every)[frames])


def test_torchcodec_in_approximate_mode_gives_the_exact_modes_frames(h264):
    """The seek mode torchcodec's docs recommend for speed takes the same frames here."""
    if unavailable("torchcodec"):
        pytest.skip(unavailable("torchcodec"))
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import Resize

    from bench.peers_video import decode_torchcodec
    source = VideoFolderSource(h264, **CLIPS)
    for index in range(len(source)):
        path, frames = str(source.path(index)), source.clip_frames(0, 0, index, train=True)
        clip, times = decode_torchcodec(path, frames, (16, 16))
        exact = VideoDecoder(path, seek_mode="exact", transforms=[Resize((16, 16))])
        want = exact.get_frames_at(frames.tolist())
        assert torch.equal(clip, want.data)
        np.testing.assert_allclose(times, want.pts_seconds.numpy(), atol=1e-9)


def test_on_the_cpu_each_worker_normalizes_its_clip(h264):
    """The values of normalize_pixels, computed in the worker (one thread) instead of on
    the main process's thread pool; with a GPU the device normalizes the uint8 batch."""
    from bench.peers_video import _Clips, decode_pyav
    from torch_bridge.modalities.base import normalize_pixels
    loader = video_peer_loader("pyav", h264, batch_size=2, size=16, num_workers=0,
                               options=CLIPS)
    assert loader.inner.dataset.normalize
    source = VideoFolderSource(h264, **CLIPS)
    files = [str(source.path(i)) for i in range(len(source))]
    item = (1, source.clip_frames(0, 0, 1, train=True), True)
    raw = _Clips(files, source.labels, decode_pyav, (16, 16))[item]["frames"]
    done = _Clips(files, source.labels, decode_pyav, (16, 16), normalize=True)[item]["frames"]
    assert raw.dtype == torch.uint8 and done.dtype == torch.float32
    assert torch.equal(done, normalize_pixels(raw))
