"""make_loader("fusion", ...): the loader contract, and video clips plus IMU aligned per frame
on both backends."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import torch

from dali_pipes.align import align_to_frames
from dali_pipes.formats.imu import imu_path_for, read_imu, write_imu
from dali_pipes.sample_data.sample_fusion import CHANNELS, fusion_dataset, small_fusion_folder
from dali_pipes.sources.fusion import FusionFolderSource
from torch_bridge import SampleError, make_loader
from torch_bridge.testing.loader_contract import LoaderContract, truncate

T, STRIDE, OFFSET = 6, 2, 0.25


class TestFusionContract(LoaderContract):
    kind, main, sample_shape = "fusion", "frames", (4, 3, 16, 16)
    exact = ("index", "label", "timestamps", "imu", "imu_valid", "source_id")
    tolerance = 0.06  # normalized units, as for video

    def break_samples(self, root, modality):
        truncate(modality.path(1))
        return {1}, re.escape(modality.path(1)), ""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return small_fusion_folder(tmp_path_factory.mktemp("fusion") / "f", n_videos=4,
                               clock_offset=OFFSET)


def _loader(data, backend, **kw):
    kw.setdefault("batch_size", 3)
    kw.setdefault("clip_length", T)
    kw.setdefault("stride", STRIDE)
    kw.setdefault("size", None)
    kw.setdefault("imu_offset", OFFSET)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("fusion", data, backend=backend, **kw)


def _all(loader):
    batches = list(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _expected(data, batch, **align):
    """align_to_frames of each sample's stream at the batch's own timestamps."""
    src = FusionFolderSource(data)
    values, valid = [], []
    for index, ts in zip(batch["index"].tolist(), batch["timestamps"].numpy(), strict=True):
        stream = read_imu(imu_path_for(src.path(index)))
        v, ok = align_to_frames(ts, stream.t, stream.values, **align)
        values.append(v.astype(np.float32))
        valid.append(ok)
    return torch.from_numpy(np.stack(values)), torch.from_numpy(np.stack(valid))


def test_imu_fields_shapes(data, backend):
    batch = next(iter(_loader(data, backend)))
    assert batch["imu"].shape == (3, T, len(CHANNELS)) and batch["imu_valid"].shape == (3, T)
    assert batch["frames"].shape[:2] == (3, T)
    assert batch["source_id"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("method", ["linear", "previous", "nearest"])
def test_imu_is_aligned_at_the_batch_timestamps(data, backend, method):
    got = _all(_loader(data, backend, imu_method=method, seed=2))
    assert sorted(got["index"].tolist()) == [0, 1, 2, 3]
    values, valid = _expected(data, got, method=method, offset=OFFSET)
    assert torch.equal(got["imu"], values) and torch.equal(got["imu_valid"], valid)


def test_gap_and_edges_are_invalid(data, backend):
    # video 0 has 24 frames at 25 fps: a 24-frame clip is the whole file. Its stream starts
    # 0.06 s after the first frame and drops out over [0.368, 0.568) s (video clock).
    got = _all(_loader(data, backend, clip_length=24, stride=1, train=False, max_gap=0.05,
                       shuffle=False, batch_size=4))
    row = got["index"].tolist().index(0)
    ts, valid = got["timestamps"][row].numpy(), got["imu_valid"][row].numpy()
    in_gap = (ts + 1e-9 >= 0.368 - 0.005) & (ts < 0.568)
    outside = ts < 0.06
    assert in_gap.any() and outside.any()
    assert not valid[in_gap].any() and not valid[outside].any()
    assert valid[~in_gap & ~outside].all()
    values, expected = _expected(data, {k: got[k][row:row + 1] for k in got},
                                 offset=OFFSET, max_gap=0.05)
    assert torch.equal(got["imu"][row:row + 1], values)
    assert torch.equal(got["imu_valid"][row:row + 1], expected)
    # without max_gap the gap is interpolated, so it is valid
    plain = _all(_loader(data, backend, clip_length=24, stride=1, train=False,
                         shuffle=False, batch_size=4))
    assert plain["imu_valid"][row].numpy()[in_gap].all()


def test_slerp_on_quaternion_channels(tmp_path, backend):
    data = small_fusion_folder(tmp_path / "q", n_videos=2)
    rng = np.random.default_rng(0)
    for path in sorted(tmp_path.glob("q/*/*.imu.csv")):
        t = np.arange(-0.5, 3.0, 0.005)
        q = rng.standard_normal((len(t), 4)) * 0.05 + [0, 0, 0, 1]
        write_imu(path, t, q / np.linalg.norm(q, axis=1, keepdims=True), ("qx", "qy", "qz", "qw"))
    got = _all(_loader(data, backend, imu_method="slerp", imu_offset=0.0))
    values, valid = _expected(data, got, method="slerp")
    assert got["imu"].shape[-1] == 4 and torch.equal(got["imu"], values)
    assert got["imu_valid"].all()


def _broken(tmp_path, data, how):
    root = tmp_path / "broken"
    shutil.copytree(data, root)
    imu = imu_path_for(root / "class_0" / "vid_0002.webm")  # sample 1 in sorted order
    if how == "missing":
        imu.unlink()
    else:
        header = ",".join(("t",) + CHANNELS)
        imu.write_text(f"{header}\n0.1,1,2,3,4,5,x\n0.2,1,2,3,4,5,6\n")  # a non-number
    return root


@pytest.mark.parametrize("how", ["missing", "malformed"])
def test_bad_imu_file_raises_naming_file_and_index(tmp_path, data, backend, how):
    root = _broken(tmp_path, data, how)
    with pytest.raises(SampleError, match=r"sample 1 \(.*vid_0002\.webm\).*vid_0002\.imu\.csv"):
        list(_loader(root, backend, shuffle=False))


@pytest.mark.parametrize("how", ["missing", "malformed"])
def test_bad_imu_file_is_skipped(tmp_path, data, backend, how):
    loader = _loader(_broken(tmp_path, data, how), backend, on_error="skip", batch_size=2)
    assert sorted(_all(loader)["index"].tolist()) == [0, 2, 3]
    assert [(s.index, s.path.endswith("vid_0002.webm")) for s in loader.skipped] == [(1, True)]


def test_channels_must_agree(tmp_path, data):
    root = tmp_path / "mixed"
    shutil.copytree(data, root)
    imu = imu_path_for(root / "class_1" / "vid_0001.webm")
    write_imu(imu, [0.0, 1.0], [[1.0], [2.0]], ("temperature",))
    with pytest.raises(ValueError, match=r"disagree.*temperature.*vid_0001\.imu\.csv"):
        make_loader("fusion", root)


@pytest.mark.parametrize("option", [{"imu_method": "cubic"}, {"max_gap": -1},
                                    {"imu_offset": float("nan")}])
def test_bad_options(data, option):
    with pytest.raises(ValueError, match=next(iter(option))):
        make_loader("fusion", data, **option)


def test_sample_data_set_is_deterministic(tmp_path):
    one = fusion_dataset(n_videos=2, n_classes=2, size=(32, 24), frames=(24,), root=tmp_path)
    assert fusion_dataset(n_videos=2, n_classes=2, size=(32, 24), frames=(24,),
                          root=tmp_path) == one
    stream = read_imu(next(one.glob("*/*.imu.csv")))
    assert stream.channels == CHANNELS and np.allclose(np.diff(stream.t).min(), 0.005)
    assert np.diff(stream.t).max() > 0.1  # the dropout gap
