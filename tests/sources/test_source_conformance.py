"""Every registered kind's source satisfies the Source seam (dali_pipes.sources.protocol):
the listing members the loader, the samplers and the tools use, and nothing else."""
from __future__ import annotations

import numpy as np
import pytest

from dali_pipes.sources.protocol import Source
from tests.conftest import MODALITY_KINDS


@pytest.mark.parametrize("kind", MODALITY_KINDS)
def test_every_source_is_a_source(tiny_data, kind):
    tiny = tiny_data(kind)
    loader = tiny.loader("torch")
    source = loader._engine.modality.source
    assert isinstance(source, Source)
    n = len(source)
    assert n > 0 and source.labels.dtype == np.int64 and source.source_ids.dtype == np.int64
    assert len(source.labels) == len(source.source_ids) == n
    assert (source.labels >= 0).all() and (source.source_ids == 0).all()
    for i in (0, n - 1):
        assert isinstance(source.path(i), str) and source.path(i)
    again = tiny.loader("torch")._engine.modality.source
    assert source.listing_digest() == again.listing_digest()  # a function of the listing
    if hasattr(source, "classes"):  # detection: len(classes) marks an image without boxes
        assert len(source.classes) >= int(source.labels.max()) + (kind != "detection")
    source.close()
    source.close()  # closing twice is harmless
    loader.close()


def test_two_folders_number_their_sources(tiny_data):
    tiny = tiny_data("image")
    source = tiny.loader("torch", data=tiny.two)._engine.modality.source
    assert set(np.unique(source.source_ids)) == {0, 1}
