"""Every registered kind's source passes the Source conformance suite
(dali_pipes.testing.source_tests): the listing members the loader, the samplers and the
tools use, and the one declared read, whose result each data kind's protocol types."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.testing.source_tests import SourceTests
from tests.conftest import MODALITY_KINDS
from torch_bridge import registry


class TestEveryRegisteredSource(SourceTests):
    @pytest.fixture(params=MODALITY_KINDS)
    def make_source(self, request, tiny_data):
        """The source of the kind's modality over its tiny data, made as make_loader makes
        it (the kind's own small options)."""
        tiny = tiny_data(request.param)
        spec = registry.get(tiny.modality)
        options = {k: v for k, v in tiny.options.items() if k in spec.options()}
        return lambda: spec.create(tiny.one, seed=0, device="cpu", options=options).source


def test_two_folders_number_their_sources(tiny_data):
    tiny = tiny_data("image")
    source = tiny.loader("torch", data=tiny.two)._engine.modality.source
    assert set(np.unique(source.source_ids)) == {0, 1}
