"""A label member beyond int64 (`.cls` holding 99999999999999999999) is one bad sample,
named by shard and member, skipped and counted under on_error="skip", on both backends."""
from __future__ import annotations

import pytest

from tests.sources.test_shards import _samples, _write
from torch_bridge import SampleError, make_loader


def _loader(root, backend, **kw):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader("image", root, backend=backend, batch_size=4, size=16, shuffle=False,
                       **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("label", [b"99999999999999999999", str(2**63).encode()])
def test_a_label_beyond_int64_is_one_bad_sample(tmp_path, backend, label):
    samples = _samples(4)
    samples[2]["cls"] = label
    _write(tmp_path / "a.tar", samples)
    with pytest.raises(SampleError, match=r"sample 2 \(.*a\.tar:k0002\.jpg\).*not an integer"):
        list(_loader(tmp_path, backend))
    loader = _loader(tmp_path, backend, on_error="skip")
    assert [i for b in loader for i in b["index"].tolist()] == [0, 1, 3]
    assert [s.index for s in loader.skipped] == [2]


def test_the_largest_int64_label_is_kept(tmp_path):
    from dali_pipes.stores.tar_index import parse_label
    assert parse_label(str(2**63 - 1).encode(), "cls") == 2**63 - 1
    assert parse_label(b'{"label": 99999999999999999999}', "json") < 0  # BAD_LABEL
