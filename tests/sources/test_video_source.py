"""VideoFolderSource: listing, clip indices, encoded segments and the PyAV fallback."""
from __future__ import annotations

import io

import av
import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.formats.video import decode_frames_pyav, probe_video, remux_segment
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources.protocol import ClipRead, DecodedClipRead
from dali_pipes.sources.video import VideoFolderSource


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return small_video_folder(tmp_path_factory.mktemp("vsrc") / "videos")


def _decode_bytes(data: np.ndarray) -> np.ndarray:
    with av.open(io.BytesIO(data.tobytes())) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def test_listing_labels_and_clips_per_video(folder):
    src = VideoFolderSource(folder, clips_per_video=3)
    assert len(src) == 18 and src.classes == ("class_0", "class_1", "class_2")
    assert src.labels.tolist() == [label for label in (0, 0, 1, 1, 2, 2) for _ in range(3)]
    assert src.path(4) == src.files[1] and src.labels[4] == src.labels[3]


def test_views_are_clips_times_crops_per_video(folder):
    src = VideoFolderSource(folder, clip_length=4, stride=2, clips_per_video=2, crops=3)
    plain = VideoFolderSource(folder, clip_length=4, stride=2, clips_per_video=2)
    assert len(src) == 36 and src.views_per_video == 6
    video, view, crop = src.views(np.arange(36))
    assert video.tolist() == [v for v in range(6) for _ in range(6)]
    assert view.tolist() == list(range(6)) * 6 and crop.tolist() == [0, 1, 2] * 12
    assert src.path(13) == src.files[2] and src.labels.tolist() == np.repeat(
        plain.labels[::2], 6).tolist()
    # view k of a video is clip k // 3 of its video, the clip `plain` gives that clip
    starts = src.clip_indices(0, 0, np.arange(36), train=False)
    expected = plain.clip_indices(0, 0, 2 * video + view // 3, train=False)
    np.testing.assert_array_equal(starts, expected)
    assert not np.array_equal(starts[0], starts[3])


def test_clip_indices_are_deterministic_and_inside_the_video(folder):
    src = VideoFolderSource(folder, clip_length=8, stride=2, clips_per_video=2)
    idx = np.arange(len(src))
    a = src.clip_indices(7, 1, idx, train=True)
    assert np.array_equal(a, src.clip_indices(7, 1, idx, train=True))
    assert not np.array_equal(a, src.clip_indices(7, 2, idx, train=True))
    counts = np.array([src.info(i).frame_count for i in idx])
    assert a.shape == (len(src), 8) and (a >= 0).all() and (a < counts[:, None]).all()
    assert (np.diff(a, axis=1) == 2).all()  # every video is longer than the 15-frame span
    centred = src.clip_indices(7, 1, idx, train=False)
    assert np.array_equal(centred, src.clip_indices(0, 5, idx, train=False))


def test_segment_holds_the_clip_from_its_keyframe(folder):
    src = VideoFolderSource(folder, clip_length=4, stride=3)
    index = next(i for i in range(len(src)) if src.info(i).frame_count == 40)
    frames = np.array([25, 28, 31, 34])
    segment, start = src.read(index, ClipRead(frames))
    key = src.info(index).keyframe_at_or_before(25)
    assert key == 24 and start == 1
    decoded = _decode_bytes(segment)
    assert len(decoded) == 34 - key + 1
    np.testing.assert_array_equal(decoded[frames - key], src.read(index, DecodedClipRead(frames)))


def test_timestamps_follow_the_probe(folder):
    src = VideoFolderSource(folder)
    frames = np.array([0, 3, 3, 9])
    np.testing.assert_array_equal(src.timestamps(2, frames), probe_video(src.path(2))
                                  .timestamps[frames])
    assert src.timestamps(2, frames)[1] == pytest.approx(3 / 25)


def test_remux_segment_rejects_frames_outside_the_video(folder):
    info = probe_video(VideoFolderSource(folder).path(0))
    with pytest.raises(IndexError, match="outside"):
        remux_segment(info, 3, info.frame_count)


def test_bad_options_and_bad_files(tmp_path, folder):
    with pytest.raises(ValueError, match="clip_length"):
        VideoFolderSource(folder, clip_length=0)
    with pytest.raises(ValueError, match="clips_per_video"):
        VideoFolderSource(folder, clips_per_video=1.5)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "broken.webm").write_bytes(b"not a video" * 10)
    src = VideoFolderSource(tmp_path)  # lazy: listing never opens a file
    with pytest.raises(FormatError, match="broken.webm"):
        src.info(0)


def test_decoded_read_matches_decode_frames_pyav(folder):
    src = VideoFolderSource(folder)
    frames = np.array([5, 6, 7, 7])
    np.testing.assert_array_equal(src.read(1, DecodedClipRead(frames)),
                                  decode_frames_pyav(src.path(1), frames)[0])
