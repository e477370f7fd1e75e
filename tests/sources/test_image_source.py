import numpy as np
import pytest

from dali_pipes.formats import FormatError
from dali_pipes.sources import ImageFolderSource
from tests.conftest import write_image_folder


def test_listing_order_labels_and_reads(image_folder):
    src = ImageFolderSource(image_folder)
    assert len(src) == 37 and src.classes == ("class_0", "class_1", "class_2")
    assert list(src.files) == sorted(src.files)
    assert src.labels.dtype == np.int64 and set(src.labels.tolist()) == {0, 1, 2}
    data, (h, w) = src.read(0)
    assert data.dtype == np.uint8 and (h, w) == (90, 120)


def test_multi_source_shares_class_ids(tmp_path):
    a = write_image_folder(tmp_path / "a", n_images=4, n_classes=2)
    b = write_image_folder(tmp_path / "b", n_images=3, n_classes=3, seed=1)
    src = ImageFolderSource([a, b])
    assert src.classes == ("class_0", "class_1", "class_2")
    assert src.source_ids.tolist() == [0] * 4 + [1] * 3
    assert src.labels.tolist() == [0, 0, 1, 1, 0, 1, 2]


def test_ignored_files_are_listed_not_samples(tmp_path):
    root = write_image_folder(tmp_path / "d", n_images=2, n_classes=1)
    (root / "class_0" / "notes.txt").write_text("x")
    (root / "class_0" / ".hidden.jpg").write_bytes(b"x")
    src = ImageFolderSource(root)
    assert len(src) == 2 and len(src.ignored) == 2


def test_missing_empty_and_flat_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolderSource(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        ImageFolderSource(tmp_path / "empty")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"x")
    with pytest.raises(ValueError, match="no class folders"):
        ImageFolderSource(tmp_path / "flat")
    (tmp_path / "noimg" / "cls").mkdir(parents=True)
    with pytest.raises(ValueError, match="no image files"):
        ImageFolderSource(tmp_path / "noimg")


def test_checked_read_rejects_non_jpeg(tmp_path):
    root = write_image_folder(tmp_path / "d", n_images=1, n_classes=1)
    (root / "class_0" / "zz.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    src = ImageFolderSource(root)
    with pytest.raises(FormatError, match="zz.png"):
        src.read(1)


# A mixed folder with EXIF orientations, transparency and JPEG 2000 ----------------------
_H, _W = 30, 44


def _picture(alpha: bool) -> np.ndarray:
    y, x = np.mgrid[:_H, :_W]
    planes = [x * 5, y * 8, (x * 3 + y * 2) % 256] + ([255 - x * 5] if alpha else [])
    return np.stack(planes, -1).astype(np.uint8)


def _write(path, pixels, fmt, orientation=None, **kw):
    from PIL import Image
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kw["exif"] = exif.tobytes()
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[1 if pixels.ndim == 2 else pixels.shape[2]]
    Image.fromarray(pixels, mode).save(path, fmt, **kw)


@pytest.fixture(scope="module")
def decode_folder(tmp_path_factory):
    """class_a: photos with EXIF orientations 1, 3, 6, 8 and the upright picture of the
    turned one; class_b: transparency (RGBA PNG and WebP, a palette PNG and a GIF with a
    transparent colour), JPEG 2000 (.jp2 RGBA, raw .j2k gray), a gray JPEG, a TIFF with
    orientation 6."""
    from dali_pipes.formats.exif import orient_array
    root = tmp_path_factory.mktemp("decode")
    a, b = root / "class_a", root / "class_b"
    a.mkdir()
    b.mkdir()
    rgb, rgba = _picture(False), _picture(True)
    for o in (1, 3, 6, 8):
        _write(a / f"photo_o{o}.jpg", rgb, "JPEG", o, quality=95)
    _write(a / "upright_o6.png", np.ascontiguousarray(orient_array(rgb, 6)), "PNG")
    _write(b / "rgba.png", rgba, "PNG")
    _write(b / "rgba.webp", rgba, "WEBP", lossless=True)
    from PIL import Image
    y, x = np.mgrid[:_H, :_W]
    indices = Image.fromarray(((x // 3 + y // 3) % 4 * 60).astype(np.uint8), "P")
    indices.putpalette([v for i in range(256) for v in (i, 255 - i, i // 2)])
    indices.save(b / "palette.png", transparency=0)  # index 0: a transparent checkerboard
    indices.save(b / "clear.gif", transparency=0)
    _write(b / "rgba.jp2", rgba, "JPEG2000")
    _write(b / "gray.j2k", rgb[..., 0], "JPEG2000", no_jp2=True)
    _write(b / "gray.jpg", rgb[..., 1], "JPEG", quality=95)
    _write(b / "turned.tiff", rgb, "TIFF", 6)
    return root


def _batches(root, backend, **options):
    from torch_bridge import make_loader
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    loader = make_loader("image", root, backend=backend, batch_size=5, size=16,
                         shuffle=True, seed=3, dtype="uint8", **options, **extra)
    batches = list(loader)
    source = loader._engine.modality.source
    names = [source.path(i).rsplit("/", 1)[1] for b in batches for i in b["index"].tolist()]
    return names, torch_cat([b["image"] for b in batches]), len(source)


def torch_cat(tensors):
    import torch
    return torch.cat(tensors)


@pytest.mark.parametrize("train", [True, False])
def test_orientation_and_alpha_on_both_backends_agree(decode_folder, train):
    """Every index once; (B, 4, H, W); the backends' pixels within JPEG/resize differences;
    alpha 255 where a file has no transparency, below it where it has."""
    got = {backend: _batches(decode_folder, backend, adjust_orientation=True,
                             alpha="keep", train=train) for backend in ("dali", "torch")}
    (names, dali, n), (t_names, ref, _) = got["dali"], got["torch"]
    assert names == t_names and sorted(names) == sorted(set(names)) and len(names) == n
    assert dali.shape == (n, 4, 16, 16) and dali.dtype == ref.dtype
    diff = (dali.float() - ref.float()).abs().flatten(1).mean(1)
    assert diff.max().item() <= 3.0, dict(zip(names, diff.tolist(), strict=True))
    clear = {"rgba.png", "rgba.webp", "palette.png", "clear.gif", "rgba.jp2"}
    for name, image in zip(names, dali, strict=True):
        assert (image[3] == 255).all().item() == (name not in clear), name


def test_a_turned_photo_matches_its_upright_picture_only_with_adjust_orientation(
        decode_folder):
    for backend in ("dali", "torch"):
        for adjust, close in ((True, True), (False, False)):
            names, images, _ = _batches(decode_folder, backend, train=False,
                                        adjust_orientation=adjust)
            turned, upright = (images[names.index(n)].float()
                               for n in ("photo_o6.jpg", "upright_o6.png"))
            assert ((turned - upright).abs().mean().item() < 3.0) == close, (backend, adjust)


def test_decode_options_are_validated_naming_the_option(decode_folder):
    from torch_bridge import make_loader
    for options, match in (({"adjust_orientation": "yes"}, "adjust_orientation='yes'"),
                           ({"alpha": "rgba"}, "alpha='rgba'.*'drop', 'keep'"),
                           ({"alpha": "keep", "color_jitter": 0.4}, "alpha='keep'")):
        with pytest.raises(ValueError, match=match):
            make_loader("image", decode_folder, backend="torch", **options)


def test_an_alpha_channel_that_cannot_be_decoded_is_a_bad_sample(tmp_path):
    """The header check passes (IEND kept), Pillow fails on the alpha plane: under
    on_error="skip" both backends skip the file, naming it, and yield the rest."""
    from torch_bridge import make_loader
    folder = tmp_path / "d" / "c"
    folder.mkdir(parents=True)
    _write(folder / "good.png", _picture(True), "PNG")
    data = (folder / "good.png").read_bytes()
    (folder / "broken.png").write_bytes(data[:len(data) // 2] + data[-12:])
    for backend in ("dali", "torch"):
        extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
        loader = make_loader("image", tmp_path / "d", backend=backend, batch_size=2, size=8,
                             alpha="keep", on_error="skip", **extra)
        batches = list(loader)
        assert sum(len(b["index"]) for b in batches) == 1, backend
        assert [s.path for s in loader.skipped] == [str(folder / "broken.png")], backend
        assert "alpha channel" in loader.skipped[0].reason, backend


@pytest.mark.parametrize("options", [
    {"erasing": 0.5, "mixup": 0.2, "num_classes": 2, "memory_format": "channels_last"},
    {"dtype": "float16", "mean": 0.5, "std": 0.25, "vflip": 0.5}])
def test_alpha_with_recipe_options_on_both_backends(decode_folder, options):
    """The 4th channel goes through layout, dtype, erasing and mixing like the others; the
    normalisation leaves it at alpha / 255."""
    from torch_bridge import make_loader
    got = {}
    for backend in ("dali", "torch"):
        extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
        loader = make_loader("image", decode_folder, backend=backend, batch_size=6, size=16,
                             seed=5, alpha="keep", **options, **extra)
        got[backend] = next(iter(loader))["image"].float()
    assert got["dali"].shape == (6, 4, 16, 16)
    assert (got["dali"] - got["torch"]).abs().mean().item() < 0.03
    if "mixup" not in options:
        assert got["dali"][:, 3].min() >= 0 and got["dali"][:, 3].max() <= 1


def test_a_fourth_mean_and_std_value_normalises_the_alpha(decode_folder):
    import torch

    from torch_bridge import make_loader
    got = {}
    for backend in ("dali", "torch"):
        extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
        for mean, std in (((0.5,) * 4, (0.5, 0.5, 0.5, 0.25)), (0.5, 0.5)):
            loader = make_loader("image", decode_folder, backend=backend, batch_size=12,
                                 size=16, seed=5, shuffle=False, alpha="keep", mean=mean,
                                 std=std, **extra)
            got[backend, len(std) if isinstance(std, tuple) else 1] = \
                next(iter(loader))["image"][:, 3]
    for backend in ("dali", "torch"):  # the same alpha / 255, then (x - 0.5) / 0.25
        want = (got[backend, 1] - 0.5) / 0.25
        assert torch.allclose(got[backend, 4], want, atol=1e-5), backend
    assert (got["dali", 4] - got["torch", 4]).abs().mean().item() < 0.05
    for options, match in (({"mean": (0.5,) * 4}, "mean"),
                           ({"alpha": "keep", "std": (0.5, 0.5, 0.5, 0)}, "alpha value 0")):
        with pytest.raises(ValueError, match=match):
            make_loader("image", decode_folder, backend="torch", **options)
