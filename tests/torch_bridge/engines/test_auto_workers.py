"""py_num_workers="auto": feed workers for PyAV-decoded codecs only, sized to the rank's cores.

Each codec family is checked on real clips encoded with PyAV
(dali_pipes/sample_data/sample_video.py).
"""
import numpy as np
import pytest

from dali_pipes.pipelines.config import PipelineConfig, load_config
from dali_pipes.sample_data.sample_video import synthetic_frames, write_video
from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.sources.video import VideoFolderSource
from tests.conftest import write_image_folder
from torch_bridge.engines import _autoworkers as autoworkers
from torch_bridge.engines._autoworkers import auto_workers, data_codecs, rank_cores, resolve_workers

# PyAV encoder, file suffix, codec name as probed, goes through PyAV on DALI's CPU backend
FAMILIES = {"h264": ("libx264", ".mp4", True), "hevc": ("libx265", ".mkv", True),
            "av1": ("libsvtav1", ".mkv", True), "mpeg4": ("mpeg4", ".mp4", True),
            "vp9": ("libvpx-vp9", ".webm", False), "vp8": ("libvpx", ".webm", False),
            "mjpeg": ("mjpeg", ".avi", False)}


def _clips(root, encoders, n_per=2):
    rng = np.random.default_rng(0)
    for i in range(n_per * len(encoders)):
        encoder, suffix = encoders[i % len(encoders)]
        write_video(root / f"class_{i % 2}" / f"v{i:02d}{suffix}",
                    synthetic_frames(rng, 6, 64, 64, i % 2), codec=encoder, gop=6)
    return root


class _Modality:  # what auto_workers reads of a modality: its source
    def __init__(self, source):
        self.source = source


@pytest.fixture(scope="module")
def family_folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("codecs")
    return {name: _clips(base / name, [(enc, suffix)])
            for name, (enc, suffix, _) in FAMILIES.items()}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_codec_family_on_the_cpu_backend(family, family_folders, monkeypatch):
    monkeypatch.setattr(autoworkers, "rank_cores", lambda: 4)
    source = VideoFolderSource(family_folders[family])
    # PyAV names AV1 streams by the decoder it opens (libdav1d); the rule only asks
    # whether DALI's graph takes the name, so either spelling must resolve the same way
    probed = data_codecs(source)
    assert probed and probed <= {family, *(("libdav1d",) if family == "av1" else ())}
    expected = 4 if FAMILIES[family][2] else 0
    assert auto_workers("auto", _Modality(source), "cpu") == expected
    assert auto_workers(3, _Modality(source), "cpu") == 3  # an int is kept as it is


def test_mpeg4_goes_through_pyav_on_a_gpu_too(family_folders, monkeypatch):
    monkeypatch.setattr(autoworkers, "rank_cores", lambda: 2)
    source = VideoFolderSource(family_folders["mpeg4"])
    assert auto_workers("auto", _Modality(source), "gpu") == 2


def test_one_fallback_codec_among_vp9_clips_starts_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(autoworkers, "rank_cores", lambda: 2)
    folder = _clips(tmp_path / "mixed", [("libvpx-vp9", ".webm"), ("libx264", ".mp4")])
    source = VideoFolderSource(folder)
    assert data_codecs(source) == {"vp9", "h264"}
    assert auto_workers("auto", _Modality(source), "cpu") == 2


def test_sources_without_video_probes_get_no_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(autoworkers, "rank_cores", lambda: 8)
    images = ImageFolderSource(write_image_folder(tmp_path / "im", n_images=4, n_classes=2))
    assert data_codecs(images) == set()
    assert auto_workers("auto", _Modality(images), "cpu") == 0
    assert auto_workers("auto", object(), "cpu") == 0  # the Dataset adapter: no source


def test_a_file_that_fails_to_probe_is_left_to_the_loader(tmp_path):
    folder = _clips(tmp_path / "v", [("libx264", ".mp4")])
    (folder / "class_0" / "broken.mp4").write_bytes(b"not a video")
    assert data_codecs(VideoFolderSource(folder)) == {"h264"}


def test_probes_spread_over_the_listing():
    assert autoworkers._spread(3, 8) == [0, 1, 2]
    picks = autoworkers._spread(1000, 8)
    assert len(picks) == 8 and picks[0] == 0 and picks[-1] == 999


@pytest.mark.parametrize("cores, expected", [(1, 0), (2, 2), (6, 6), (64, 8)])
def test_resolve_sizes_by_cores(cores, expected):
    assert resolve_workers("auto", fallback_codecs={"h264"}, rank_cores=cores) == expected
    assert resolve_workers("auto", fallback_codecs=set(), rank_cores=cores) == 0
    assert resolve_workers(0, fallback_codecs={"h264"}, rank_cores=cores) == 0


@pytest.mark.parametrize("affinity, cpu_count, local_world, expected", [
    (16, 16, 1, 16), (16, 16, 4, 4), (16, 16, 32, 1),  # unpinned: cores shared by ranks
    (4, 16, 4, 4),  # pinned by the launcher: its affinity already is this rank's share
])
def test_rank_cores(affinity, cpu_count, local_world, expected):
    assert rank_cores(affinity=affinity, cpu_count=cpu_count,
                      local_world_size=local_world) == expected


def test_rank_cores_reads_local_world_size(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert rank_cores(affinity=8, cpu_count=8) == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE='two'"):
        rank_cores(affinity=8, cpu_count=8)


def test_config_takes_auto_or_a_count():
    assert PipelineConfig().py_num_workers == "auto"
    assert load_config(None).py_num_workers == "auto"
    assert load_config("low_memory").py_num_workers == 0
    assert load_config({"py_num_workers": 3}).py_num_workers == 3
    for bad in ("two", -1, 1.5, True):
        with pytest.raises(ValueError, match="py_num_workers must be an int >= 0 or \"auto\""):
            load_config({"py_num_workers": bad})


def _pool_after_one_batch(folder):
    from torch_bridge import make_loader
    loader = make_loader("video", folder, backend="dali", device="cpu", batch_size=2,
                         seed=0, clip_length=4, size=(32, 32))
    try:
        next(iter(loader))
        return loader._engine._pool
    finally:
        loader.close()


def test_default_loader_starts_workers_for_h264_not_vp9(family_folders, monkeypatch):
    monkeypatch.setattr(autoworkers, "rank_cores", lambda: 2)
    pool = _pool_after_one_batch(family_folders["h264"])
    assert pool is not None and pool.workers == 2
    assert _pool_after_one_batch(family_folders["vp9"]) is None


def test_auto_pool_that_cannot_start_feeds_in_process():
    def failing(n):
        raise RuntimeError(f"feed workers (py_num_workers={n}) could not start")
    with pytest.warns(RuntimeWarning, match='"auto" chose 2 feed workers.*could not start'):
        assert autoworkers.start_feed_pool(failing, "auto", 2) is None
    with pytest.raises(RuntimeError, match="could not start"):
        autoworkers.start_feed_pool(failing, 2, 2)  # an explicit count is the user's choice
    assert autoworkers.start_feed_pool(lambda n: ("pool", n), "auto", 3) == ("pool", 3)
