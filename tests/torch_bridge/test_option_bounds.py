"""Option values at the edges of their ranges: a batch_size beyond the data set works on the
DALI backend as on torch (one batch of everything, not a pipeline error), a seed that would
alias another one is refused, and clip options that would hold absurd amounts of frames in
memory are refused at make_loader, naming the option."""
from __future__ import annotations

import pytest

from torch_bridge import make_loader


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_batch_size_beyond_the_data_set_gives_one_batch(tiny_data, backend):
    loader = tiny_data("image").loader(backend=backend, batch_size=10**12, shuffle=False)
    batches = [b["index"].tolist() for b in loader]
    assert len(loader) == 1 and batches == [list(range(10))]


@pytest.mark.parametrize("seed", [2**63, 2**64, 2**80, -2**63 - 1])
def test_a_seed_that_would_alias_another_is_refused(tiny_data, seed):
    with pytest.raises(ValueError, match=r"seed must be an int in \[-2\*\*63, 2\*\*63\)"):
        tiny_data("image").loader(backend="torch", seed=seed)


def test_the_widest_seeds_are_distinct(tiny_data):
    orders = [[i for b in tiny_data("image").loader(backend="torch", batch_size=10, seed=s)
               for i in b["index"].tolist()] for s in (-1, 2**63 - 1, 0)]
    assert len({tuple(o) for o in orders}) == 3


@pytest.mark.parametrize("option", [{"clip_length": 10**9}, {"clips_per_video": 10**10},
                                    {"stride": 10**12}])
def test_clip_options_beyond_memory_are_refused(tiny_data, option):
    name = next(iter(option))
    with pytest.raises(ValueError, match=rf"{name}=\d+ is beyond the bound"):
        make_loader("video", tiny_data("video").one, backend="torch", **option)
