"""Several ranks on a node: DALI threads share the node's cores, decoder threads are not
pinned to the same cores, "cuda" with one visible GPU means that GPU, and make_loader
refuses launcher variables that would make ranks collide."""
from __future__ import annotations

import pytest

from dali_pipes.pipelines import config as cfg
from torch_bridge import loader, make_loader


def test_one_rank_keeps_its_cores_plus_one():
    assert cfg.default_threads(cores=16, node_cores=16, ranks=1) == 17
    assert cfg.default_threads(cores=4, node_cores=64, ranks=1) == 5


def test_ranks_sharing_the_whole_node_split_it():
    assert cfg.default_threads(cores=64, node_cores=64, ranks=8) == 8
    assert cfg.default_threads(cores=4, node_cores=4, ranks=8) == 1


def test_a_rank_already_bound_by_the_launcher_uses_its_cores():
    assert cfg.default_threads(cores=8, node_cores=64, ranks=8) == 9


def test_defaults_read_affinity_and_local_world_size(monkeypatch):
    monkeypatch.setattr(cfg.os, "sched_getaffinity", lambda pid: set(range(32)))
    monkeypatch.setattr(cfg.os, "cpu_count", lambda: 32)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert cfg.PipelineConfig().threads() == 8 and cfg.affine_threads() is False
    assert cfg.PipelineConfig(num_threads=3).threads() == 3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert cfg.PipelineConfig().threads() == 33 and cfg.affine_threads() is True
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "x")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE='x' is not an integer"):
        cfg.ranks_per_node()


def test_mixed_decoders_get_affine_false_when_ranks_share_a_node(monkeypatch):
    import nvidia.dali.fn as fn

    from dali_pipes.pipelines.config import load_config
    from dali_pipes.pipelines.video import build_video_pipeline
    seen = []
    real = fn.decoders.video

    def spy(*args, **kwargs):
        seen.append(kwargs.get("affine"))
        return real(*args, **kwargs)
    monkeypatch.setattr(fn.decoders, "video", spy)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    build_video_pipeline(device="gpu", batch_size=2, config=load_config(None), size=(32, 32),
                         device_id=0)  # defined only: DALI checks the argument names
    assert seen == [False]


@pytest.mark.parametrize("count, local, want", [(1, "3", 0), (1, None, 0), (4, "2", 2)])
def test_local_gpu(count, local, want):
    assert loader._local_gpu(count=count, local=local) == want


def test_local_rank_beyond_several_gpus_is_an_error():
    with pytest.raises(ValueError, match="LOCAL_RANK='5'.*4 visible"):
        loader._local_gpu(count=4, local="5")


def test_resolve_device_with_one_visible_gpu_and_local_rank(monkeypatch):
    monkeypatch.setattr(loader.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(loader.torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert loader.resolve_device("cuda") == loader.torch.device("cuda", 0)
    assert loader.resolve_device("cuda:0") == loader.torch.device("cuda", 0)


def test_local_rank_from_the_environment_is_checked(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert loader._local_gpu(count=4) == 1
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(ValueError, match="LOCAL_RANK='one' is not an integer"):
        loader._local_gpu(count=4)


@pytest.mark.parametrize("env, said", [
    ({"WORLD_SIZE": "2"}, r"world size 2 \(WORLD_SIZE\) but no rank"),
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "RANK='abc' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": str(10**12)}, "larger than the data set's 37 samples"),
])
def test_make_loader_refuses_ranks_that_would_collide(image_folder, monkeypatch, env, said):
    """Before: every process rank 0 (half of each epoch never read), a bare int() error, or
    a MemoryError at the first batch."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=said):
        make_loader("image", image_folder, backend="torch", batch_size=4,
                    reference={"num_workers": 0})
