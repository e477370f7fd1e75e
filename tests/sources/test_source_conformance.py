"""Every registered kind's source satisfies the Source seam (dali_pipes.sources.protocol):
the listing members the loader, the samplers and the tools use, and the one declared read,
whose result each data kind's protocol types."""
from __future__ import annotations

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
from tests.conftest import MODALITY_KINDS

KIND_PROTOCOLS = {"image": protocol.ImageSource, "video": protocol.VideoSource,
                  "frames": protocol.FrameSource, "patch": protocol.PatchSource,
                  "window": protocol.WindowSource}


def _encoded(data) -> None:
    assert isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1
    assert data.size > 0


def _size(size) -> None:
    assert isinstance(size, tuple) and len(size) == 2
    assert all(isinstance(v, int) and v > 0 for v in size)


def _read_image(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedImage)
    _encoded(got.data)
    _size(got.size)
    stored = source.read(index, STORED)
    _encoded(stored.data)
    assert stored.size is None


def _read_video(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedClip)
    _encoded(got.data)
    assert isinstance(got.start, int) and got.start >= 0
    frames = np.zeros(3, np.int64)  # the first frame, three times
    clip = source.read(index, DecodedClipRead(frames))
    assert clip.dtype == np.uint8 and clip.ndim == 4 and clip.shape[::3] == (3, 3)
    assert (clip[0] == clip[2]).all()
    assert source.read(index, ClipRead(frames)).start == 0


def _read_frames(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, EncodedFrames)
    assert len(got.data) == len(got.sizes) == source.clip_length
    for data, size in zip(got.data, got.sizes, strict=True):
        _encoded(data)
        _size(size)
    twice = source.read(index, ClipRead(np.zeros(2, np.int64)))
    assert twice.data[0].tobytes() == twice.data[1].tobytes()


def _read_patch(source, index: int) -> None:
    got = source.read(index)
    p = source.patch_size
    assert isinstance(got, np.ndarray) and got.shape == (source.n_bands, p, p)
    assert got.dtype == source.dtype


def _read_window(source, index: int) -> None:
    got = source.read(index)
    assert isinstance(got, np.ndarray) and got.dtype == source.dtype
    assert got.ndim == 2 and got.shape[1] == source.channels
    assert 0 < len(got) <= source.length
    first = source.read(index, WindowRead(0))
    assert first.shape[1] == source.channels and 0 < len(first) <= source.length


READS = {"image": _read_image, "video": _read_video, "frames": _read_frames,
         "patch": _read_patch, "window": _read_window}


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
    assert isinstance(source, KIND_PROTOCOLS[source.data_kind])
    READS[source.data_kind](source, n - 1)
    source.close()
    source.close()  # closing twice is harmless
    loader.close()


def test_two_folders_number_their_sources(tiny_data):
    tiny = tiny_data("image")
    source = tiny.loader("torch", data=tiny.two)._engine.modality.source
    assert set(np.unique(source.source_ids)) == {0, 1}
