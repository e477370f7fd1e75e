"""Several DALI pipelines taking batches in turn (engines._pipe_ring): the same batches,
resume, skips and error naming as one pipeline; the automatic count; the option's range."""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import nvidia.dali.fn as fn
import pytest
import torch
from nvidia.dali import Pipeline

from dali_pipes import native
from dali_pipes.pipelines.config import PipelineConfig, load_config
from dali_pipes.recipes.policies_graph import native_policy
from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import SampleError, make_loader
from torch_bridge.engines._pipe_ring import PipeRing, pipeline_count, ring_member_config
from torch_bridge.testing.loader_contract import truncate


def _loader(folder, pipelines: int, **kw):
    return make_loader("image", folder, backend="dali", batch_size=8, size=32, seed=3,
                       config={"pipelines": pipelines}, **kw)


def _batches(loader, epochs: int = 2) -> list[dict]:
    return [{k: v.clone() for k, v in b.items() if torch.is_tensor(v)}
            for _ in range(epochs) for b in loader]


def _assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            assert torch.equal(x[key], y[key]), key


def _passthrough(batch_size: int = 2) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=None,
                    prefetch_queue_depth=1, exec_dynamic=True)
    with pipe:
        pipe.set_outputs(fn.external_source(name="x") * 1)
    return pipe


def test_a_ring_returns_batches_in_the_order_fed():
    ring = PipeRing([_passthrough() for _ in range(3)])
    ring.build()
    sent = [[np.full(3, 10 * k + i, np.int32) for i in range(2)] for k in range(7)]
    for k in range(2):  # two fed before the first run, as the engine does on a fresh one
        ring.feed_input("x", sent[k])
    ring.schedule_run()
    got = []
    for k in range(2, 7):
        ring.feed_input("x", sent[k])
        ring.schedule_run()
        got.append(ring.outputs())
    got += [ring.outputs(), ring.outputs()]
    for batch, (out,) in zip(sent, got, strict=True):
        assert [int(np.asarray(t)[0]) for t in out] == [int(a[0]) for a in batch]
    with pytest.raises(RuntimeError, match="only 7 batches were scheduled"):
        ring.outputs()


def test_two_pipelines_yield_the_batches_of_one(image_folder):
    one, two = _loader(image_folder, 1), _loader(image_folder, 2)
    _assert_same(_batches(one), _batches(two))
    assert isinstance(two._engine._pipe, PipeRing) and len(two._engine._pipe.pipes) == 2
    assert not isinstance(one._engine._pipe, PipeRing)


def test_two_pipelines_resume_mid_epoch(image_folder):
    whole = _batches(_loader(image_folder, 1), epochs=1)
    first = _loader(image_folder, 2)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    resumed = _loader(image_folder, 2)
    resumed.load_state_dict(state)
    _assert_same(whole[2:], _batches(resumed, epochs=1))


def test_two_pipelines_skip_and_name_a_bad_file(image_folder, tmp_path):
    root = shutil.copytree(image_folder, tmp_path / "data")
    every = [i for b in _loader(root, 1, shuffle=False) for i in b["index"].tolist()]
    loader = _loader(root, 2, on_error="skip", shuffle=False)
    bad = loader._engine.modality.path(9)  # in the second batch: the second pipeline's
    truncate(bad)
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == [i for i in every if i != 9]
    assert [s.index for s in loader.skipped] == [9]
    with pytest.raises(SampleError, match=rf"sample 9 \(.*{re.escape(bad)}\)"):
        list(_loader(root, 2, on_error="raise", shuffle=False))


def test_the_count_is_automatic_for_policy_graphs_on_the_cpu(image_folder, tmp_path,
                                                             monkeypatch):
    recipe = tmp_path / "policy.toml"
    recipe.write_text('size = 32\nauto_augment = "randaugment"\n')
    policy = make_loader("image", image_folder, backend="dali", batch_size=8,
                         recipe=str(recipe))._engine.modality
    plain = _loader(image_folder, 0)._engine.modality
    auto = PipelineConfig()
    assert pipeline_count(auto, plain, "cpu") == 1
    assert pipeline_count(auto, policy, "gpu") == 1
    assert pipeline_count(PipelineConfig(pipelines=1), policy, "cpu") == 1
    assert pipeline_count(PipelineConfig(pipelines=3), plain, "cpu") == 3
    composed = 2 if len(os.sched_getaffinity(0)) >= 2 else 1
    assert pipeline_count(auto, policy, "cpu") == (1 if native_policy() else composed)
    monkeypatch.setattr(native, "_loaded", {"policy_op": None})  # as without a compiler
    assert pipeline_count(auto, policy, "cpu") == composed


def test_members_take_one_batch_each_and_a_share_of_the_threads():
    member = ring_member_config(PipelineConfig(num_threads=3, prefetch_queue_depth=2), 2)
    assert (member.num_threads, member.prefetch_queue_depth) == (2, 1)
    assert ring_member_config(PipelineConfig(num_threads=1), 2).num_threads == 1


@pytest.mark.parametrize("value", [-1, 9])
def test_pipelines_out_of_range_names_the_option(value):
    with pytest.raises(ValueError, match=rf"pipelines must be in \[0, 8\].*got {value}"):
        load_config({"pipelines": value})


def test_a_batch_failing_inside_dali_is_blamed_the_same_on_two_pipelines(tmp_path):
    """A JPEG only DALI's decoder rejects (its batch fails in the second pipeline or the
    first, depending on the shuffle): the culprit is named and skipped, the pass goes on,
    and both epochs match one pipeline's."""
    root = write_image_folder(tmp_path / "img", n_images=14, n_classes=2)
    good = (root / "class_0" / "img_0000.jpg").read_bytes()
    (root / "class_1" / "corrupt.jpg").write_bytes(undefined_quant_table(good))
    one, two = (make_loader("image", root, backend="dali", batch_size=4, size=32, seed=4,
                            on_error="skip", config={"pipelines": n}) for n in (1, 2))
    _assert_same(_batches(one), _batches(two))
    assert two.skipped == one.skipped and len(one.skipped) == 2
    assert all(s.path.endswith("corrupt.jpg") for s in two.skipped)
