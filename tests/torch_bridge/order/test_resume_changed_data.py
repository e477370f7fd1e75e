"""Resume refuses data changed under the same names (issue 15 item 8): file sizes and
modification times, label map contents (hyperspectral), IMU files (fusion)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from tests.conftest import BACKENDS, write_image_folder


def _state(tiny, data, backend="torch"):
    loader = tiny.loader(backend, data=data, seed=1)
    next(iter(loader))
    return loader.state_dict()


def _refused(tiny, data, state, backend="torch"):
    loader = tiny.loader(backend, data=data, seed=1)
    with pytest.raises(ValueError, match=r"listing is .*sizes\+mtimes sha256 \w+' in the state"):
        loader.load_state_dict(state)


def _keep_time(path, write) -> None:
    """`write()` a file, then give it back its old modification time."""
    st = os.stat(path)
    write()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("backend", BACKENDS)
def test_image_replaced_under_the_same_name_is_refused(tiny_data, tmp_path, backend):
    tiny = tiny_data("image")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root, backend)
    victim = sorted(root.glob("class_1/*.jpg"))[-1]
    other = write_image_folder(tmp_path / "other", n_images=1, n_classes=1, seed=9,
                               sizes=((64, 64),))
    _keep_time(victim, lambda: shutil.copyfile(next(other.glob("*/*.jpg")), victim))
    _refused(tiny, root, state, backend)


def test_image_touched_is_refused_and_unchanged_is_accepted(tiny_data, tmp_path):
    tiny = tiny_data("image")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root)
    tiny.loader("torch", data=root, seed=1).load_state_dict(state)
    victim = sorted(root.glob("class_0/*.jpg"))[0]
    os.utime(victim, ns=(0, os.stat(victim).st_mtime_ns + 10**9))
    _refused(tiny, root, state)


def test_video_reencoded_is_refused(tiny_data, tmp_path):
    tiny = tiny_data("video")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root)
    videos = sorted(root.glob("*/*.webm"))
    _keep_time(videos[0], lambda: shutil.copyfile(videos[1], videos[0]))
    _refused(tiny, root, state)


def test_edited_label_map_is_refused_even_with_its_size_and_time(tiny_data, tmp_path):
    tiny = tiny_data("hyperspectral")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root)
    path = root / "b.labels.npy"
    labels = np.load(path)
    edited = np.where(labels > 0, labels % 2 + 1, 0).astype(labels.dtype)  # same pixels
    assert (edited != labels).any() and ((edited > 0) == (labels > 0)).all()
    _keep_time(path, lambda: np.save(path, edited))
    _refused(tiny, root, state)


def test_changed_imu_file_is_refused(tiny_data, tmp_path):
    tiny = tiny_data("fusion")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root)
    imu = sorted(root.glob("*/*.imu.csv"))[0]
    lines = imu.read_text().splitlines()
    imu.write_text("\n".join(lines[:-3]) + "\n")
    _refused(tiny, root, state)


def test_frame_folder_reextracted_is_refused(tiny_data, tmp_path):
    tiny = tiny_data("frames")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    state = _state(tiny, root)
    stamps = sorted(root.glob("*/*/timestamps.npy"))[0]
    np.save(stamps, np.load(stamps)[:-1])
    _refused(tiny, root, state)
