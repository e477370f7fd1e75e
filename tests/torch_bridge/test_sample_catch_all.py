"""on_error="skip" catches every per-sample failure (any Exception, not only OSError /
ValueError / RuntimeError) on both backends and in the check tool: Pillow's
DecompressionBombError for a GIF frame beyond its logical screen. Every frame counts against
max_pixels. (A COCO run length out of range, which made pycocotools raise OverflowError, is
now refused when the file is opened.)"""
from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from dali_pipes.sample_data.sample_detection import write_detection_folder
from tests.conftest import write_image_folder
from torch_bridge import SampleError, make_loader
from torch_bridge.tools.check import main as check_main

OVER_PILLOW = 10**9  # a max_pixels above the frame's, so Pillow's own limit is what fails


def oversized_gif(side: int = 20000) -> bytes:
    """A real 8x8 GIF whose frame descriptor claims side x side pixels: the frame lies
    beyond the logical screen, which Pillow grows to hold it (refusing it above its own
    decompression-bomb limit with DecompressionBombError)."""
    out = io.BytesIO()
    Image.new("P", (8, 8), 1).save(out, format="GIF")
    raw = bytearray(out.getvalue())
    at = raw.index(b"\x2c\x00\x00\x00\x00")  # the image descriptor at (0, 0)
    raw[at + 5:at + 9] = side.to_bytes(2, "little") * 2
    return bytes(raw)


@pytest.fixture(scope="module")
def gif_folder(tmp_path_factory):
    root = write_image_folder(tmp_path_factory.mktemp("gif"), n_images=8, n_classes=2)
    (root / "class_1" / "zz_bomb.gif").write_bytes(oversized_gif())
    return root


def _loader(data, backend, modality="image", **kw):
    extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
    return make_loader(modality, data, backend=backend, batch_size=4, size=16,
                       shuffle=False, **extra, **kw)


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("max_pixels,reason", [(None, "pixel count"),
                                               (OVER_PILLOW, "DecompressionBombError")])
def test_a_gif_frame_beyond_its_screen_is_one_skipped_sample(gif_folder, backend,
                                                             max_pixels, reason):
    opts = {} if max_pixels is None else {"max_pixels": max_pixels}
    loader = _loader(gif_folder, backend, on_error="skip", **opts)
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == list(range(8))  # the GIF, listed last, is index 8
    assert [(s.index, s.path.endswith("zz_bomb.gif")) for s in loader.skipped] == [(8, True)]
    assert reason in loader.skipped[0].reason
    with pytest.raises(SampleError, match=rf"sample 8 .*zz_bomb\.gif.*{reason}"):
        list(_loader(gif_folder, backend, **opts))


@pytest.mark.parametrize("extra,reason", [([], "pixel count"),
                                          (["--max-pixels", str(OVER_PILLOW)],
                                           "DecompressionBombError")])
def test_check_reports_the_gif_and_goes_on(gif_folder, capsys, extra, reason):
    assert check_main([str(gif_folder), *extra]) == 1
    out = capsys.readouterr().out
    assert f"SKIP {gif_folder / 'class_1' / 'zz_bomb.gif'}: " in out and reason in out
    assert "checked 9 files, 1 bad" in out


def test_an_rle_that_would_overflow_fails_the_file_on_open(tmp_path):
    """A run length out of range made pycocotools raise OverflowError per sample; the COCO
    reader now refuses it when the file is opened, naming the annotation and the field."""
    root = write_detection_folder(tmp_path / "d", n_images=6, seed=1)
    doc = json.loads((root / "instances.json").read_text())
    image = doc["images"][2]
    h, w = image["height"], image["width"]
    victim = next(a for a in doc["annotations"] if a["image_id"] == image["id"])
    victim["segmentation"] = {"size": [h, w], "counts": [-5, h * w + 5]}
    (root / "instances.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"segmentation\.counts"):
        _loader(root, "torch", "detection", masks=True, on_error="skip")


def test_the_torch_backends_workers_skip_it_too(gif_folder):
    """The catch-all holds in DataLoader worker processes as in the main one."""
    loader = make_loader("image", gif_folder, backend="torch", batch_size=4, size=16,
                         shuffle=False, on_error="skip", max_pixels=OVER_PILLOW,
                         reference={"num_workers": 2})
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == list(range(8))
    assert [s.index for s in loader.skipped] == [8]
    assert "DecompressionBombError" in loader.skipped[0].reason


def test_keyboard_interrupt_is_not_a_bad_sample():
    from torch_bridge.errors import SampleGuard

    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        SampleGuard("skip").run(0, "x", 0, interrupted)
