"""The conformance suite of the `Source` seam (dali_pipes.sources.protocol), shipped with the
interface: a source is proven by one small subclass that says how to make it
(tests/sources/test_source_conformance.py: the source of every registered modality kind).

Subclasses name their class `Test...` so pytest collects them and define the fixture
`make_source`: `make_source() -> Source`, a new source over the subclass's data set (each
call a new object over the same data). The suite checks the listing (labels, source ids,
paths, the digest), pickling and the one declared read: a sample read through `read`
has the type and shape its `data_kind`'s protocol declares. numpy and pytest only.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from dali_pipes.sources import protocol
from dali_pipes.sources.protocol import (
    STORED,
    ClipRead,
    DecodedClipRead,
    EncodedClip,
    EncodedFrames,
    EncodedImage,
    Source,
    WindowRead,
)

KIND_PROTOCOLS = {"image": protocol.ImageSource, "video": protocol.VideoSource,
                  "frames": protocol.FrameSource, "patch": protocol.PatchSource,
                  "window": protocol.WindowSource}


def _encoded(data) -> None:
    assert isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1
    assert data.size > 0


def _size(size) -> None:
    assert isinstance(size, tuple) and len(size) == 2
    assert all(isinstance(v, int) and v > 0 for v in size)


def _image(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedImage)
    _encoded(got.data)
    _size(got.size)
    stored = source.read(index, STORED)
    _encoded(stored.data)
    assert stored.size is None


def _video(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedClip)
    _encoded(got.data)
    assert isinstance(got.start, int) and got.start >= 0
    first = np.zeros(3, np.int64)  # the first frame, three times
    assert source.read(index, ClipRead(first)).start == 0
    clip = source.read(index, DecodedClipRead(first))
    assert isinstance(clip, np.ndarray) and clip.dtype == np.uint8
    assert clip.ndim == 4 and clip.shape[0] == 3 and clip.shape[3] == 3
    assert (clip[0] == clip[2]).all()


def _frames(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedFrames)
    assert len(got.data) == len(got.sizes) == source.clip_length
    for data, size in zip(got.data, got.sizes, strict=True):
        _encoded(data)
        _size(size)
    twice = source.read(index, ClipRead(np.zeros(2, np.int64)))
    assert twice.data[0].tobytes() == twice.data[1].tobytes()


def _patch(source, index: int) -> None:
    got = source.read(index)
    p = source.patch_size
    assert isinstance(got, np.ndarray) and got.shape == (source.n_bands, p, p)
    assert got.dtype == source.dtype


def _window(source, index: int) -> None:
    for got in (source.read(index), source.read(index, WindowRead(0))):
        assert isinstance(got, np.ndarray) and got.dtype == source.dtype
        assert got.ndim == 2 and got.shape[1] == source.channels
        assert 0 < len(got) <= source.length


CHECKS = {"image": _image, "video": _video, "frames": _frames, "patch": _patch,
          "window": _window}


def check_read(source: Source, index: int) -> None:
    """Sample `index` read through `source.read` has its data kind's type and shape."""
    assert source.data_kind in CHECKS, f"unknown data_kind {source.data_kind!r}"
    CHECKS[source.data_kind](source, index)


def _same(a, b) -> bool:
    """Two read results hold the same values (arrays, tuples and lists of them)."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    return bool(a == b)


class SourceTests:
    """The behaviour every source shares (see `dali_pipes.sources.protocol`)."""

    @pytest.fixture
    def source(self, make_source):
        source = make_source()
        yield source
        source.close()

    def test_is_a_source_of_its_kind(self, source):
        assert isinstance(source, Source)
        assert isinstance(source, KIND_PROTOCOLS[source.data_kind])

    def test_a_label_and_a_source_id_per_sample(self, source):
        n = len(source)
        assert n > 0
        for values in (source.labels, source.source_ids):
            assert isinstance(values, np.ndarray) and values.dtype == np.int64
            assert values.shape == (n,)
        assert (source.labels >= -1).all() and (source.source_ids >= 0).all()  # -1: none
        if hasattr(source, "classes"):  # len(classes): a sample without a class (detection)
            assert int(source.labels.max()) <= len(source.classes)

    def test_paths_name_samples(self, source):
        for i in (0, len(source) - 1):
            assert isinstance(source.path(i), str) and source.path(i)

    def test_the_digest_is_a_function_of_the_listing(self, source, make_source):
        digest = source.listing_digest()
        assert isinstance(digest, str) and digest
        assert make_source().listing_digest() == digest

    @pytest.mark.parametrize("where", ["first", "last"])
    def test_read_gives_its_kinds_sample(self, source, where):
        check_read(source, 0 if where == "first" else len(source) - 1)

    def test_a_pickled_source_reads_the_same_sample(self, source):
        clone = pickle.loads(pickle.dumps(source))
        assert len(clone) == len(source)
        assert clone.listing_digest() == source.listing_digest()
        index = len(source) - 1
        # a video's segment is remuxed anew (its container ids differ): compare its frames
        request = DecodedClipRead() if source.data_kind == "video" else None
        assert _same(clone.read(index, request), source.read(index, request))
        clone.close()

    def test_closing_twice_is_harmless(self, source):
        source.close()
        source.close()
