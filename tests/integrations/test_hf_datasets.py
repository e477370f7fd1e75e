"""The image modality over a Hugging Face `datasets.Dataset` read from a local Parquet file
written by `datasets` itself: the same batches as the class folders it was made from, on
both backends, with resume, sharding and on_error unchanged."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import PIL.Image
import pytest
import torch

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local files only, never the hub
datasets = pytest.importorskip("datasets")

from dali_pipes.formats.errors import FormatError  # noqa: E402
from dali_pipes.sample_data.tiny_data import write_image_folder  # noqa: E402
from dali_pipes.sources.hf import HFImageSource  # noqa: E402
from dali_pipes.sources.protocol import STORED  # noqa: E402
from torch_bridge import SampleError, make_loader  # noqa: E402

OPTS = dict(batch_size=4, size=16, device="cpu")
CLASSES = ["class_0", "class_1", "class_2"]


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("class_*/*.jpg"))  # the order ImageFolderSource lists them in


def _parquet(tmp: Path, columns: dict, features) -> object:
    """`columns` written to Parquet by `datasets`, read back as a memory-mapped Dataset."""
    path = tmp / "train.parquet"
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(path))
    return datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp / "cache"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("hf_jpegs"), n_images=14, n_classes=3)


@pytest.fixture(scope="module")
def image_ds(folder, tmp_path_factory):
    """An `Image()` feature column (embedded bytes and the original path) + ClassLabel."""
    files = _files(folder)
    features = datasets.Features({"img": datasets.Image(),
                                  "y": datasets.ClassLabel(names=CLASSES)})
    cols = {"img": [{"bytes": f.read_bytes(), "path": str(f)} for f in files],
            "y": [CLASSES.index(f.parent.name) for f in files]}
    return _parquet(tmp_path_factory.mktemp("hf_image"), cols, features)


def _batches(loader) -> list[dict]:
    return [{k: v.clone() for k, v in b.items()} for b in loader]


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_same_batches_as_the_class_folders(folder, image_ds, backend):
    """Also through worker processes: DALI feed workers, DataLoader workers."""
    cfg = {"config": {"py_num_workers": 2}} if backend == "dali" else \
        {"reference": {"num_workers": 2}}
    got = _batches(make_loader("image", image_ds, backend=backend, image_column="img",
                               label_column="y", **cfg, **OPTS))
    want = _batches(make_loader("image", folder, backend=backend, **OPTS))
    assert [b["index"].tolist() for b in got] == [b["index"].tolist() for b in want]
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for name in w:
            assert torch.equal(g[name], w[name]), name


def test_both_backends_agree(image_ds):
    dali, ref = (_batches(make_loader("image", image_ds, backend=b, image_column="img",
                                      label_column="y", **OPTS)) for b in ("dali", "torch"))
    assert [b["index"].tolist() for b in dali] == [b["index"].tolist() for b in ref]
    for d, r in zip(dali, ref, strict=True):
        assert torch.equal(d["label"], r["label"])
        assert (d["image"] - r["image"]).abs().mean() < 0.1  # decoders differ a little


def test_imagefolder_attributes(folder, image_ds):
    loader = make_loader("image", image_ds, image_column="img", label_column="y", **OPTS)
    assert loader.classes == CLASSES
    assert loader.class_to_idx == {"class_0": 0, "class_1": 1, "class_2": 2}
    files = _files(folder)
    assert [loader.path(i) for i in range(len(files))] == [str(f) for f in files]
    for batch in loader:
        for index, label in zip(batch["index"].tolist(), batch["label"].tolist(), strict=True):
            assert CLASSES[label] == Path(loader.path(index)).parent.name


def test_bytes_and_path_columns(folder, tmp_path):
    """Raw bytes and string labels; plain file paths and int labels."""
    files = _files(folder)
    raw = _parquet(tmp_path / "raw", {"jpeg": [f.read_bytes() for f in files],
                                      "cls": [f.parent.name for f in files]}, None)
    src = HFImageSource(raw, image_column="jpeg", label_column="cls")
    assert src.classes == CLASSES and src.path(3).endswith("[row 3]")
    assert src.labels.tolist() == [CLASSES.index(f.parent.name) for f in files]
    paths = _parquet(tmp_path / "paths", {"file": [str(f) for f in files],
                                          "label": [CLASSES.index(f.parent.name)
                                                    for f in files]}, None)
    src = HFImageSource(paths, image_column="file")
    assert src.path(5) == str(files[5]) and src.classes == ["0", "1", "2"]
    assert bytes(src.read(5, STORED).data) == files[5].read_bytes()
    width, height = PIL.Image.open(files[5]).size
    assert src.read(5).size == (height, width)


def test_resume_and_sharding(image_ds):
    opts = dict(OPTS, image_column="img", label_column="y", seed=5)
    full = _batches(make_loader("image", image_ds, **opts))
    first = make_loader("image", image_ds, **opts)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    resumed = make_loader("image", image_ds, **opts)
    resumed.load_state_dict(state)
    rest = _batches(resumed)
    assert [b["index"].tolist() for b in rest] == [b["index"].tolist() for b in full[2:]]
    assert torch.equal(rest[0]["image"], full[2]["image"])
    shards = [torch.cat([b["index"] for b in make_loader(
        "image", image_ds, rank=r, world_size=2, **opts)]).tolist() for r in (0, 1)]
    assert not set(shards[0]) & set(shards[1])
    assert set(shards[0]) | set(shards[1]) == set(range(len(image_ds)))


def test_on_error_names_the_row(folder, tmp_path):
    files = _files(folder)
    jpegs = [f.read_bytes() for f in files]
    jpegs[4] = jpegs[4][:200]  # truncated: no scan, no EOI
    ds = _parquet(tmp_path, {"image": jpegs, "label": [0] * len(files)}, None)
    with pytest.raises(SampleError, match=r"\[row 4\]"):
        list(make_loader("image", ds, shuffle=False, **OPTS))
    loader = make_loader("image", ds, on_error="skip", shuffle=False, **OPTS)
    seen = torch.cat([b["index"] for b in loader]).tolist()
    assert seen == [i for i in range(len(files)) if i != 4]
    assert [s.index for s in loader.skipped] == [4] and "[row 4]" in loader.skipped[0].path


def test_bad_columns_are_named(image_ds, folder):
    with pytest.raises(FormatError, match="image_column.*'nope'.*img, y"):
        make_loader("image", image_ds, image_column="nope", label_column="y", **OPTS)
    with pytest.raises(ValueError, match="label_column: only for data given as a datasets"):
        make_loader("image", folder, label_column="y", **OPTS)


def test_rows_stay_memory_mapped(image_ds, folder):
    """The source reads rows from the Arrow file's mapping: no copy of the table, and a
    worker process gets the mapping (by file name), not the images."""
    src = HFImageSource(image_ds, image_column="img", label_column="y")
    assert isinstance(src._rows.data, datasets.table.MemoryMappedTable)
    pickled = pickle.dumps(src)
    assert len(pickled) < sum(f.stat().st_size for f in _files(folder)) / 10
    clone = pickle.loads(pickled)
    assert bytes(clone.read(3, STORED).data) == bytes(src.read(3, STORED).data)
    assert clone.listing_digest() == src.listing_digest()


def test_resume_from_the_same_files_in_another_cache(image_ds, tmp_path):
    """The listing digest names the data, not where `datasets` cached it."""
    parquet = tmp_path / "copy.parquet"
    image_ds.to_parquet(str(parquet))
    a, b = (datasets.Dataset.from_parquet(str(parquet), cache_dir=str(tmp_path / c))
            for c in ("one", "two"))
    opts = dict(OPTS, image_column="img", label_column="y")
    first = make_loader("image", a, **opts)
    next(iter(first))
    resumed = make_loader("image", b, **opts)
    resumed.load_state_dict(first.state_dict())  # refused if the digests differed
    assert len(list(resumed)) == len(first) - 1


def _labelled(folder, tmp_path, labels, feature=None):
    """The first len(labels) JPEGs with these int labels, through Parquet; `feature`
    (e.g. a ClassLabel) is cast onto the label column afterwards, as `cast_column` does
    without checking the values."""
    jpegs = [f.read_bytes() for f in _files(folder)[:len(labels)]]
    ds = _parquet(tmp_path, {"image": jpegs, "label": labels}, None)
    return ds if feature is None else ds.cast_column("label", feature)


@pytest.mark.parametrize("label", [70_000, 2_000_000_000, 2**63 - 1])
def test_an_id_sized_int_label_is_refused_naming_row_and_column(folder, tmp_path, label):
    """Classes of a plain int column are named 0..max label: a label far beyond the number
    of rows (an id column) is refused before any name is made."""
    ds = _labelled(folder, tmp_path, [0, 1, label, 2])
    with pytest.raises(FormatError, match=rf"\[row 2\].*label.*label {label} is too large"):
        make_loader("image", ds, **OPTS)


def test_int_labels_up_to_the_bound_keep_numbered_classes(folder, tmp_path):
    from dali_pipes.sources.hf import PLAIN_LABELS_ALWAYS_ALLOWED
    top = PLAIN_LABELS_ALWAYS_ALLOWED - 1  # a few rows of a large label space
    src = HFImageSource(_labelled(folder, tmp_path, [0, top, 3]))
    assert len(src.classes) == top + 1 and src.classes[top] == str(top)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_class_label_beyond_its_names_is_refused(folder, tmp_path, backend):
    ds = _labelled(folder, tmp_path, [0, 2, 3, 1], datasets.ClassLabel(names=CLASSES))
    with pytest.raises(FormatError, match=r"\[row 2\].*label.*label 3 is beyond the 3 names"):
        make_loader("image", ds, backend=backend, **OPTS)


def test_a_negative_label_is_refused(folder, tmp_path):
    ds = _labelled(folder, tmp_path, [0, -1, 1])
    with pytest.raises(FormatError, match=r"\[row 1\].*label.*label -1 is negative"):
        make_loader("image", ds, **OPTS)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_every_image_format_folders_take(tmp_path, backend):
    """PNG, WebP and BMP rows load as they do from class folders of the same files."""
    folder = tmp_path / "mixed"
    for i, fmt in enumerate(["PNG", "WEBP", "BMP", "PNG", "WEBP", "JPEG"]):
        out = folder / f"class_{i % 2}" / f"img_{i}.{fmt.lower()}"
        out.parent.mkdir(parents=True, exist_ok=True)
        pixels = (torch.arange(40 * 30 * 3) * (i + 7) % 251).to(torch.uint8)
        PIL.Image.fromarray(pixels.reshape(30, 40, 3).numpy()).save(
            out, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    files = sorted(folder.glob("class_*/*"))
    features = datasets.Features({"img": datasets.Image(),
                                  "y": datasets.ClassLabel(names=["class_0", "class_1"])})
    ds = _parquet(tmp_path, {"img": [{"bytes": f.read_bytes(), "path": str(f)} for f in files],
                             "y": [int(f.parent.name[-1]) for f in files]}, features)
    got = _batches(make_loader("image", ds, backend=backend, image_column="img",
                               label_column="y", **OPTS))
    want = _batches(make_loader("image", folder, backend=backend, **OPTS))
    assert sum(len(b["index"]) for b in got) == len(files)
    for g, w in zip(got, want, strict=True):
        for name in w:
            assert torch.equal(g[name], w[name]), name
