"""Broken, empty, truncated and non-JPEG files under on_error, on both backends; then broken
videos, frame folders, cubes, label maps and IMU files for every other modality."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
import torch

# The decoders the torch backend's workers import on first use (the modalities import them
# inside load()): imported here, forked workers inherit them instead of each paying seconds.
import torchvision.io  # noqa: F401
import torchvision.transforms.v2.functional  # noqa: F401

from dali_pipes.formats import FormatError
from dali_pipes.sample_data.sample_video import small_video_folder
from dali_pipes.sources import ImageFolderSource
from dali_pipes.sources.frames import frame_name
from dali_pipes.sources.video_frames import FrameFolderSource
from tests.conftest import undefined_quant_table, write_image_folder
from torch_bridge import SampleError, make_loader

BAD = ("empty.jpg", "text.jpg", "png.jpg", "truncated.jpg", "corrupt.jpg")


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    root = write_image_folder(tmp_path_factory.mktemp("bad"), n_images=20, n_classes=2)
    good = (root / "class_0" / "img_0000.jpg").read_bytes()
    folder = root / "class_1"
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "text.jpg").write_text("this is not an image\n")
    (folder / "png.jpg").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (folder / "truncated.jpg").write_bytes(good[: len(good) * 2 // 3])
    # Passes the cheap header checks; only the decoder finds the problem.
    (folder / "corrupt.jpg").write_bytes(undefined_quant_table(good))
    (folder / "readme.txt").write_text("not a sample")
    return root


def _loader(folder, backend, **kw):
    # DALI pipelines run in this test process too: forked workers must survive that.
    extra = {"reference": {"num_workers": 2}} if backend == "torch" else {}
    return make_loader("image", folder, backend=backend, batch_size=6, size=24, **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_skip_keeps_every_good_sample_and_names_the_bad(bad_folder, backend):
    src = ImageFolderSource(bad_folder)
    bad_index = {src.files.index(str(bad_folder / "class_1" / n)) for n in BAD}
    loader = _loader(bad_folder, backend, on_error="skip")
    for epoch in range(2):
        loader.set_epoch(epoch)
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == sorted(set(range(len(src))) - bad_index)
    skipped = loader.skipped
    assert len(skipped) == 2 * len(BAD)
    assert {s.path.rsplit("/", 1)[-1] for s in skipped} == set(BAD)
    assert {s.index for s in skipped} == bad_index and {s.epoch for s in skipped} == {0, 1}
    assert all(s.reason for s in skipped)


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_a_wholly_skipped_batch_comes_empty_on_a_distributed_rank(tmp_path, bad_folder,
                                                                   backend):
    """A rank whose batch was entirely skipped still yields len() batches: that one empty
    (every field, batch dimension 0), so DDP ranks waiting on each other never hang."""
    root = tmp_path / "all_bad"
    shutil.copytree(bad_folder / "class_1", root / "class_1",
                    ignore=shutil.ignore_patterns("img_*"))
    n = len(ImageFolderSource(root))
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    loader = make_loader("image", root, backend=backend, batch_size=n, size=24, rank=0,
                         world_size=2, on_error="skip", **extra)
    batches = list(loader)
    assert len(loader) == len(batches) == 1
    assert {k: (tuple(v.shape), v.dtype) for k, v in batches[0].items()} == {
        "image": ((0, 0, 0, 0), torch.float32), "label": ((0,), torch.int64),
        "index": ((0,), torch.int64)}
    assert {s.index for s in loader.skipped} <= set(range(n)) and loader.skipped


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("name", BAD)
def test_raise_names_file_and_index(tmp_path, backend, name, bad_folder):
    root = write_image_folder(tmp_path / "d", n_images=7, n_classes=1)
    (root / "class_0" / name).write_bytes((bad_folder / "class_1" / name).read_bytes())
    index = ImageFolderSource(root).files.index(str(root / "class_0" / name))
    with pytest.raises(SampleError) as info:
        for _ in _loader(root, backend, shuffle=False):
            pass
    assert name in str(info.value) and f"sample {index}" in str(info.value)
    assert info.value.index == index and info.value.path.endswith(name)  # also from a worker


def test_dali_recovers_after_a_decoder_failure_mid_epoch(tmp_path, bad_folder):
    root = write_image_folder(tmp_path / "d", n_images=30, n_classes=1)
    (root / "class_0" / "img_0013.jpg").write_bytes(
        (bad_folder / "class_1" / "corrupt.jpg").read_bytes())
    loader = _loader(root, "dali", on_error="skip", shuffle=False)
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == [i for i in range(30) if i != 13]
    assert [s.index for s in loader.skipped] == [13]
    seen = [i for b in loader for i in b["index"].tolist()]  # the next epoch skips it early
    assert len(seen) == 29 and len(loader.skipped) == 2


def test_missing_or_empty_data_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_loader("image", tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        make_loader("image", tmp_path / "empty")


# Every modality ---------------------------------------------------------------------------
# One broken file in a copy of a modality's tiny data set (tests/conftest.py: TinyData), on
# both backends. "raise": SampleError naming the file and the index. "skip": two epochs
# complete, every other index once per epoch, and loader.skipped holds one record per epoch
# with that index, the sample's path and the reason.


def _corrupt_payload(path: Path, start: int, end: int) -> None:
    """Flip the bytes of [start, end): the container still opens, the frames do not decode."""
    data = bytearray(path.read_bytes())
    for k in range(start, end):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))


def _garble_packets(path: Path) -> None:
    """Rewrite `path` with every video packet's payload replaced by as many 0xFF bytes: the
    container and its timestamps stay valid (the probe passes), no frame decodes."""
    tmp = path.with_name("garbled_" + path.name)
    with av.open(str(path)) as src, av.open(str(tmp), "w") as dst:
        stream = src.streams.video[0]
        out = dst.add_stream_from_template(stream)
        for packet in src.demux(stream):
            if packet.size == 0:
                continue
            bad = av.Packet(b"\xff" * packet.size)
            bad.pts, bad.dts, bad.time_base = packet.pts, packet.dts, packet.time_base
            bad.is_keyframe, bad.stream = packet.is_keyframe, out
            dst.mux(bad)
    tmp.replace(path)


def _vp9_corrupt(root: Path) -> Path:
    bad = root / "class_1" / "vid_0001.webm"  # VP9: DALI's CPU decoder gets it
    _garble_packets(bad)
    return bad


def _vp9_truncated(root: Path) -> Path:
    bad = root / "class_1" / "vid_0001.webm"  # the header survives, no whole frame does
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 5])
    return bad


def _h264_corrupt(root: Path) -> Path:
    bad = root / "class_0" / "vid_0001.mp4"
    data = bad.read_bytes()  # frames in `mdat`, the index (`moov`) after them
    _corrupt_payload(bad, data.index(b"mdat") + 40, data.index(b"moov") - 8)
    return bad


def _h264_truncated(root: Path) -> Path:
    bad = root / "class_0" / "vid_0001.mp4"  # `moov` is lost: FFmpeg cannot open it
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    return bad


def _imu(how: str):
    def mutate(root: Path) -> Path:
        video = root / "class_1" / "vid_0001.webm"
        imu = video.with_name("vid_0001.imu.csv")
        if how == "missing":
            imu.unlink()
        elif how == "empty":
            imu.write_bytes(b"")
        elif how == "header only":
            imu.write_text(imu.read_text().splitlines()[0] + "\n")
        else:  # a row with a cell too many
            lines = imu.read_text().splitlines()
            lines[3] += ",1.0"
            imu.write_text("\n".join(lines) + "\n")
        return video
    return mutate


def _frame(how: str):
    def mutate(root: Path) -> Path:
        folder = root / "class_1" / "vid_0001"
        source = FrameFolderSource(root, clip_length=4, stride=2)
        index = source.files.index(str(folder))
        clip = source.clip_indices(0, 0, [index], train=False)[0]
        frame = folder / frame_name(int(clip[1]))  # inside every eval clip of this folder
        good = frame.read_bytes()
        if how == "missing":
            frame.unlink()
        elif how == "truncated":
            frame.write_bytes(good[: len(good) // 2])
        else:
            frame.write_bytes(undefined_quant_table(good))
        return folder
    return mutate


def _h264_folder(root: Path) -> None:
    if "libx264" not in av.codecs_available:
        pytest.skip("PyAV has no libx264 encoder")
    small_video_folder(root, n_videos=3, n_classes=1, frames=(12,), size=(32, 24),
                       codec="libx264")


# case: (kind, mutate(root) -> the broken sample's path, pattern of the reason)
CASES = {
    "vp9-corrupt": ("video", _vp9_corrupt, r"vid_0001\.webm|decoders\.video"),
    "vp9-truncated": ("video", _vp9_truncated, r"vid_0001\.webm: (container|frame_count)"),
    "h264-corrupt": ("h264", _h264_corrupt, r"vid_0001\.mp4: frames: decoding"),
    "h264-truncated": ("h264", _h264_truncated, r"vid_0001\.mp4: container"),
    "fusion-vp9-corrupt": ("fusion", _vp9_corrupt, r"vid_0001\.webm|decoders\.video"),
    "fusion-imu-missing": ("fusion", _imu("missing"), r"vid_0001\.imu\.csv"),
    "fusion-imu-empty": ("fusion", _imu("empty"), r"vid_0001\.imu\.csv: line 1"),
    "fusion-imu-header-only": ("fusion", _imu("header only"), r"imu\.csv: rows"),
    "fusion-imu-extra-cell": ("fusion", _imu("extra cell"), r"imu\.csv: line 4"),
    "frame-corrupt": ("frames", _frame("corrupt"), r"."),
    "frame-truncated": ("frames", _frame("truncated"), r"."),
    "frame-missing": ("frames", _frame("missing"), r"frame_\d+\.jpg"),
}


def _broken_copy(tiny_data, tmp_path, case):
    kind, mutate, reason = CASES[case]
    root = tmp_path / "data"
    if kind == "h264":
        _h264_folder(root)
        kind = "video"
    else:
        shutil.copytree(tiny_data(kind).one, root)
    return tiny_data(kind), root, mutate(root), reason


def _index_of(loader, path: Path) -> int:
    modality = loader._engine.modality
    found = [i for i in range(len(modality)) if modality.path(i) == str(path)]
    assert len(found) == 1, found
    return found[0]


def _on(backend: str) -> dict:
    """"torch-workers": the torch backend with a worker process, where the error is raised
    in the worker and raised again in this process."""
    if backend == "torch-workers":
        return {"backend": "torch", "reference": {"num_workers": 1}}
    return {"backend": backend}


@pytest.mark.parametrize("backend", ["dali", "torch", "torch-workers"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_modality_raise_names_file_and_index(tiny_data, tmp_path, backend, case):
    tiny, root, bad, _ = _broken_copy(tiny_data, tmp_path, case)
    loader = tiny.loader(data=root, train=False, shuffle=False, **_on(backend))
    index = _index_of(loader, bad)
    with pytest.raises(SampleError, match=rf"sample {index} \({re.escape(str(bad))}\)") as info:
        for _ in loader:
            pass
    assert info.value.index == index and info.value.path == str(bad)


@pytest.mark.parametrize("backend", ["dali", "torch", "torch-workers"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_modality_skip_keeps_the_others_and_names_the_skipped(tiny_data, tmp_path,
                                                                    backend, case):
    tiny, root, bad, reason = _broken_copy(tiny_data, tmp_path, case)
    loader = tiny.loader(data=root, train=False, on_error="skip", **_on(backend))
    index = _index_of(loader, bad)
    for _ in range(2):  # epochs 0 and 1: the loader moves on by itself
        seen = [i for b in loader for i in b["index"].tolist()]
        assert sorted(seen) == [i for i in range(loader.plan.num_samples) if i != index]
    assert [(s.index, s.path, s.epoch) for s in loader.skipped] == \
        [(index, str(bad), 0), (index, str(bad), 1)]
    assert all(re.search(reason, s.reason) for s in loader.skipped), loader.skipped[0].reason


@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_truncated_spe_after_make_loader_skips_or_names_its_samples(tiny_data, tmp_path,
                                                                    backend):
    """A scene file that breaks after validation fails each of its samples on first read."""
    tiny = tiny_data("hyperspectral")
    root = shutil.copytree(tiny.one, tmp_path / "data")
    skipping = tiny.loader(backend, data=root, on_error="skip")
    raising = tiny.loader(backend, data=root, shuffle=False)
    spe = root / "c.spe"
    spe.write_bytes(spe.read_bytes()[: spe.stat().st_size // 2])
    scene_c = {i for i in range(len(skipping.plan.rank_indices(0)))
               if skipping._engine.modality.path(i) == str(spe)}
    seen = [i for b in skipping for i in b["index"].tolist()]
    assert sorted(seen) == sorted(set(range(skipping.plan.num_samples)) - scene_c)
    assert sorted(s.index for s in skipping.skipped) == sorted(scene_c)
    assert all(s.path == str(spe) and "c.spe" in s.reason for s in skipping.skipped)
    with pytest.raises(SampleError, match=rf"sample {min(scene_c)} \(.*c\.spe\)"):
        list(raising)


@pytest.mark.parametrize("scene, field", [("a.img", "data size"), ("c.spe", r"\w+")])
def test_truncated_scene_at_listing_time_fails_make_loader(tiny_data, tmp_path, scene, field):
    """A file that cannot be opened when the loader is made: FormatError naming the file and
    the field, for both backends (the listing is shared)."""
    root = shutil.copytree(tiny_data("hyperspectral").one, tmp_path / "data")
    (root / scene).write_bytes((root / scene).read_bytes()[:-2])
    for backend in ("dali", "torch"):
        with pytest.raises(FormatError, match=rf"{re.escape(scene)}: {field}") as info:
            tiny_data("hyperspectral").loader(backend, data=root)
        assert info.value.path.endswith(scene) and info.value.field


@pytest.mark.parametrize("broken, field", [("missing", "label map"), ("shape", "label map"),
                                           ("float", "label map")])
def test_bad_label_map_fails_make_loader(tiny_data, tmp_path, broken, field):
    root = shutil.copytree(tiny_data("hyperspectral").one, tmp_path / "data")
    labels = root / "b.labels.npy"
    if broken == "missing":
        labels.unlink()
    elif broken == "shape":
        np.save(labels, np.ones((2, 2), np.int32))
    else:
        np.save(labels, np.load(labels).astype(np.float32))
    for backend in ("dali", "torch"):
        with pytest.raises(FormatError, match=rf"b\.(hdr|labels\.npy): {field}"):
            tiny_data("hyperspectral").loader(backend, data=root)


def test_fusion_without_any_readable_imu_fails_make_loader(tiny_data, tmp_path):
    root = shutil.copytree(tiny_data("fusion").one, tmp_path / "data")
    for imu in root.glob("*/*.imu.csv"):
        imu.unlink()
    with pytest.raises(ValueError, match="no readable <stem>.imu.csv"):
        tiny_data("fusion").loader("torch", data=root)
