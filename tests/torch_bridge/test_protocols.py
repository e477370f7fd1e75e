"""Every registered modality kind, both engines and the Dataset adapter conform to the
declared seams (torch_bridge.protocols)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from dali_pipes.schema import FRAME_OUTPUTS
from tests.conftest import MODALITY_KINDS
from torch_bridge import registry
from torch_bridge.integrations.adapter import _DatasetFeed, _DatasetPlan, dali_from_dataset
from torch_bridge.order.plan import EpochPlan
from torch_bridge.protocols import BatchPlan, DaliFeed, Engine, Modality


@pytest.mark.parametrize("kind", MODALITY_KINDS)
def test_every_registered_kind_is_a_modality(tiny_data, kind):
    tiny = tiny_data(kind)
    loader = tiny.loader("torch")
    modality = loader.engine.modality  # the engine runs the loader's modality
    spec, entry = registry.KINDS[kind]
    assert type(modality) is entry.modality_class()  # the registry chose this kind
    assert isinstance(modality, Modality) and isinstance(modality, DaliFeed)
    assert modality.name == spec.name and len(modality) == len(modality.source)
    assert tuple(modality.dali_outputs) == (FRAME_OUTPUTS if kind == "frames"
                                            else spec.batch_schema.outputs)
    assert isinstance(pickle.loads(pickle.dumps(modality)), Modality)  # spawned workers
    assert isinstance(loader.engine, Engine) and isinstance(loader.plan, BatchPlan)
    dali = tiny.loader("dali")
    assert isinstance(dali.engine, Engine) and type(dali.engine) is not type(loader.engine)
    assert dali.engine.modality is not modality and type(dali.engine.modality) is type(modality)
    loader.close(), dali.close()


class _Items(torch.utils.data.Dataset):
    def __init__(self, folder):
        self.files = sorted(folder.glob("*/*.jpg"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.files[i].read_bytes(), 0


def test_the_adapter_feed_and_plan_conform(tiny_data):
    loader = dali_from_dataset(_Items(tiny_data("image").one), batch_size=4, size=16,
                               num_workers=0)
    assert isinstance(loader._feed, _DatasetFeed) and isinstance(loader._feed, DaliFeed)
    assert not isinstance(loader._feed, Modality)  # no torch path: it only feeds DALI
    assert isinstance(loader._plan, _DatasetPlan) and isinstance(loader._plan, BatchPlan)
    assert not isinstance(loader._plan, DaliFeed) and not isinstance(loader._feed, BatchPlan)
    assert isinstance(loader._engine, Engine)
    assert len(loader._feed) == 10 and len(loader._plan) == 3
    assert sorted(i for b in loader for i in b["index"].tolist()) == list(range(10))
    loader.close()


def test_a_plan_or_modality_missing_a_member_does_not_conform():
    plan = EpochPlan(10, 4)
    assert isinstance(plan, BatchPlan)

    class NoBatches:
        batch_size, rank, world_size = 4, 0, 1

        def __len__(self):
            return 3

    assert not isinstance(NoBatches(), BatchPlan)

    class NoMeta:
        dali_outputs = ("image",)

        def __len__(self):
            return 1

        def path(self, index):
            return "x"

        def build_pipeline(self, **kw):
            return None

        def feeds(self, epoch, indices, guard, keys=None):
            return {}, np.zeros(0, np.int64)

    assert not isinstance(NoMeta(), DaliFeed)
