"""make_loader("arrays", ...): the loader contract on `.npy` series, and both backends against
the rows written to disk (windows, padding, mask, normalisation), bad files, S3 and HTTP."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from dali_pipes import schema
from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_arrays import write_series_folder
from dali_pipes.sources.arrays import ARRAYS, window_starts
from tests.stores.servers import MotoS3, RangeServer
from torch_bridge import SampleError, make_loader
from torch_bridge.testing.loader_contract import LoaderContract, assert_same, copies, truncate

L = 8


class TestArraysContract(LoaderContract):
    kind, main, sample_shape = "arrays", "series", (L, 3)
    exact = ("index", "label", "series", "length", "mask")  # casts and divisions are exact

    def break_samples(self, root, modality):
        """Headers are checked when the loader is made; a file cut after that fails the
        read of its window (the store sees it changed since the listing, naming it), which
        on_error handles."""
        bad = {i for i in range(len(modality.source)) if "/square/" in modality.path(i)}
        for i in bad:
            truncate(modality.path(i), keep=100)
        return bad, r"/square/series_\d+\.npy", r"changed since it was listed"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """12 float16 series of 2 channels in 3 classes, 3 to 20 rows."""
    return write_series_folder(tmp_path_factory.mktemp("arrays") / "data", n_files=12,
                               n_classes=3, channels=2, dtype="float16", seed=1)


def _loader(data, backend, **kw):
    kw = {"batch_size": 5, "length": L, "seed": 3, **kw}
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("arrays", data, backend=backend, **kw)


def _epoch(loader, epoch=0):
    loader.set_epoch(epoch)
    batches = copies(loader)
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def _expected(loader, index, epoch, train, mean=0.0, std=1.0):
    """The window read straight from the file with numpy, normalised and padded."""
    source = loader._engine.modality.source
    rows = np.load(source.path(index)).astype(np.float32)
    start = int(window_starts(3, epoch, [index], [len(rows)], L, train=train)[0])
    real = (rows[start:start + L] - np.float32(mean)) / np.float32(std)
    return np.pad(real, ((0, L - len(real)), (0, 0)))


@pytest.mark.parametrize("train", [True, False])
def test_windows_are_the_files_rows_padded_with_a_mask(folder, backend, train):
    loader = _loader(folder, backend, train=train)
    for epoch in (0, 1):
        got = _epoch(loader, epoch)
        for row, index in enumerate(got["index"].tolist()):
            want = _expected(loader, index, epoch, train)
            assert np.array_equal(got["series"][row].numpy(), want), index
            n = min(len(np.load(loader._engine.modality.path(index))), L)
            assert got["length"][row] == n
            assert got["mask"][row].tolist() == [True] * n + [False] * (L - n)
    lengths = got["length"]
    assert (lengths < L).any() and (lengths == L).any()  # both padded and full windows


def test_length_and_mask_are_the_variable_length_fields():
    assert {k: ARRAYS[k] for k in schema.LENGTHS} == schema.LENGTHS


def test_window_starts_vary_with_epoch_and_stay_in_bounds():
    rows = np.array([3, 8, 20, 1000] * 25)
    keys = np.arange(100)
    a, b = (window_starts(0, e, keys, rows, L, train=True) for e in (0, 1))
    assert (a >= 0).all() and (a + np.minimum(rows, L) <= rows).all()
    assert (a[rows <= L] == 0).all() and (a != b).any()
    assert np.array_equal(a, window_starts(0, 0, keys, rows, L, train=True))
    assert np.array_equal(window_starts(0, 0, keys, rows, L, train=False),
                          np.maximum(rows - L, 0) // 2)


def test_normalisation_per_channel_on_both_backends(folder):
    mean, std = [0.25, -0.5], [2.0, 0.5]
    got = {b: _epoch(_loader(folder, b, mean=mean, std=std)) for b in ("dali", "torch")}
    for name in got["dali"]:
        assert torch.equal(got["dali"][name], got["torch"][name]), name
    loader = _loader(folder, "torch", mean=mean, std=std)
    for row, index in enumerate(got["dali"]["index"].tolist()):
        want = _expected(loader, index, 0, True, np.float32(mean), np.float32(std))
        assert np.array_equal(got["dali"]["series"][row].numpy(), want), index


@pytest.mark.parametrize("options, match", [
    ({"mean": 1.0}, "both or neither"), ({"mean": 0.0, "std": [1.0, 0.0]}, "positive"),
    ({"mean": [1.0, 2.0, 3.0], "std": 1.0}, "2 numbers"), ({"length": 0}, "positive int"),
    ({"train": "yes"}, "does not fit bool"), ({"mean": "0", "std": 1}, "mean must be a number")])
def test_bad_options_are_refused(folder, options, match):
    with pytest.raises(ValueError, match=match):
        _loader(folder, "torch", **options)


@pytest.fixture
def with_bad_files(folder, tmp_path):
    """The folder plus a file of each kind of bad header, in the class folders."""
    root = Path(shutil.copytree(folder, tmp_path / "data"))
    (root / "sine" / "z_magic.npy").write_bytes(b"not numpy at all" * 8)
    np.save(root / "sine" / "z_float64.npy", np.zeros((5, 2)))
    np.save(root / "square" / "z_channels.npy", np.zeros((5, 3), np.float16))
    return root, {"z_magic.npy": "magic", "z_float64.npy": "dtype",
                  "z_channels.npy": "shape"}


def test_a_bad_file_is_named_with_its_field(with_bad_files, backend):
    root, fields = with_bad_files
    loader = _loader(root, backend, shuffle=False, batch_size=20)
    with pytest.raises(SampleError, match=r"z_(magic|float64|channels)\.npy\).*"
                                          r"npy: (magic|dtype|shape): "):
        list(loader)


def test_on_error_skip_counts_every_bad_file(with_bad_files, backend):
    root, fields = with_bad_files
    loader = _loader(root, backend, on_error="skip")
    seen = [i for b in loader for i in b["index"].tolist()]
    skipped = {Path(s.path).name: s.reason for s in loader.skipped}
    assert set(skipped) == set(fields) and len(seen) == 12
    for name, field in fields.items():
        assert f"{name}: {field}: " in skipped[name]


def test_a_data_set_without_a_good_file_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    np.save(tmp_path / "a" / "x.npy", np.zeros((4, 2), np.complex64))
    with pytest.raises(FormatError, match=r"x\.npy: dtype: unsupported"):
        _loader(tmp_path, "torch")


@pytest.fixture(scope="module")
def s3():
    with MotoS3() as server:
        yield server


def test_s3_folder_and_http_file_urls_give_the_local_batches(folder, s3, backend,
                                                             tmp_path):
    import boto3
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=f"arrays-{backend}")
    files = sorted(p for p in folder.rglob("*.npy"))
    for path in files:
        client.put_object(Bucket=f"arrays-{backend}", Key=f"d/{path.relative_to(folder)}",
                          Body=path.read_bytes())
    want = copies(_loader(folder, backend))
    got = copies(_loader(f"s3://arrays-{backend}/d/", backend, storage_options=s3.options))
    assert_same(got, want)
    with RangeServer(folder) as server:
        urls = [f"{server.url}/{p.relative_to(folder).as_posix()}" for p in files]
        by_url = copies(_loader(urls, backend))
    # a list of file URLs is a list of sources, one file each, in the order given
    assert [b["source_id"].tolist() for b in by_url] == [b["index"].tolist() for b in by_url]
    assert_same([{k: v for k, v in b.items() if k != "source_id"} for b in by_url], want)


def test_the_check_tool_detects_arrays_and_names_each_bad_file(with_bad_files):
    from torch_bridge.tools.check import check_data
    root, fields = with_bad_files
    report = check_data(root)
    assert report.modality == "arrays" and report.checked == 15
    found = {Path(p.path).name: p.reason for p in report.problems}
    assert set(found) == set(fields)
    assert all(f"{name}: {field}: " in found[name] for name, field in fields.items())


@pytest.fixture(params=[((5, 4), "float16"), ((5, 2), "int16")], ids=["4 channels", "int16"])
def stray_first(folder, tmp_path, request):
    """The 12 good files plus one stray of another layout that sorts first in the listing."""
    root = Path(shutil.copytree(folder, tmp_path / "data"))
    shape, dtype = request.param
    stray = root / sorted(p.name for p in root.iterdir())[0] / "a_stray.npy"
    np.save(stray, np.ones(shape, dtype))
    return root, stray, f"(T, {shape[1]}) {dtype}"


def test_one_stray_file_cannot_outvote_the_data_set(stray_first, backend):
    """Before: the first file in listing order set the layout, so the 12 good files were bad
    samples and the stray was yielded."""
    root, stray, layout = stray_first
    loader = _loader(root, backend, on_error="skip")
    seen = [i for b in loader for i in b["index"].tolist()]
    assert sorted(loader.path(i) for i in seen) == sorted(str(p) for p in root.rglob("series_*"))
    assert [s.path for s in loader.skipped] == [str(stray)]
    reason = loader.skipped[0].reason
    assert f"this file {layout}, the data set (T, 2) float16 in 12 of the 13 readable" in reason
    with pytest.raises(SampleError, match=r"a_stray\.npy"):
        list(_loader(root, backend, shuffle=False, batch_size=20))


def test_a_tie_goes_to_the_layout_listed_first():
    from dali_pipes.formats.npy import NpyHeader
    from dali_pipes.sources.arrays import majority_layout
    a, b = (NpyHeader(np.dtype("float32"), (4, 2), 128), NpyHeader(np.dtype("int16"), (9, 3), 128))
    assert majority_layout([a, b])[0] == (2, np.dtype("float32"))
    assert majority_layout([b, a])[0] == (3, np.dtype("int16"))
    assert majority_layout([b, a, a]) == ((2, np.dtype("float32")), " in 2 of the 3 readable files")


def test_the_check_tool_names_the_stray_not_the_good_files(stray_first):
    from torch_bridge.tools.check import check_data
    root, stray, layout = stray_first
    report = check_data(root)
    assert report.checked == 13 and [p.path for p in report.problems] == [str(stray)]
    assert layout in report.problems[0].reason
