"""make_loader("detection", ...) beyond the contract: masks, the eval round trip checked
by pycocotools' COCOeval, files written and read by other tools (pycocotools, torchvision),
box accounting, options, and the README's Faster R-CNN conversion."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import torch

from dali_pipes.geometry import boxes as geo
from dali_pipes.sample_data.sample_detection import write_detection_folder
from dali_pipes.sources.detection import DetectionSource
from torch_bridge import make_loader

pytest.importorskip("pycocotools")
SIZE = 64


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_detection_folder(tmp_path_factory.mktemp("det") / "d", n_images=9, seed=4)


def _loader(data, backend, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("size", SIZE)
    if backend == "torch":
        kw.setdefault("reference", {"num_workers": 0})
    return make_loader("detection", data, backend=backend, **kw)


def _all(loader) -> list[dict]:
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def _unmapped(batches, canvas=(SIZE, SIZE)):
    """image_id -> (boxes in file pixels, labels) of eval batches, inverting the geometry
    from orig_size alone (what an evaluation of predictions does)."""
    out = {}
    for b in batches:
        g = geo.eval_geometry(b["orig_size"][:, 0].numpy(), b["orig_size"][:, 1].numpy(),
                              canvas)
        for row, (iid, n) in enumerate(zip(b["image_id"].tolist(), b["num_boxes"].tolist(),
                                           strict=True)):
            out[iid] = (geo.unmap_boxes(b["boxes"][row, :n].numpy(), g.row(row)),
                        b["labels"][row, :n].numpy())
    return out


@pytest.mark.parametrize("options", [dict(train=True, masks=True),
                                     dict(train=True, scale_jitter=(0.3, 2.0), masks=True),
                                     dict(train=True, min_iou=0.3, crowd="keep"),
                                     dict(train=False, fit="shorter", size=40,
                                          pad_to_multiple=32, masks=True, semantic=True)])
def test_backends_give_equal_targets_and_masks(folder, options):
    dali, ref = (_all(_loader(folder, b, seed=3, **options)) for b in ("dali", "torch"))
    assert len(dali) == len(ref) == 3
    for a, b in zip(dali, ref, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            if name == "image":
                assert (a[name] - b[name]).abs().mean() < 0.05
            else:
                assert torch.equal(a[name], b[name]), name
    if options.get("masks"):
        _masks_within_boxes(dali[0], _loader(folder, "dali", seed=3, **options))
    if options.get("semantic"):
        _semantic_follows_masks(dali[0])


def _semantic_follows_masks(batch) -> None:
    """Pixels of a mask carry a label + 1; padding (outside the image) is 255."""
    for row, n in enumerate(batch["num_boxes"].tolist()):
        sem, masks = batch["semantic"][row], batch["masks"][row, :n].bool()
        h, w = batch["orig_size"][row].tolist()
        for k in range(n):
            assert (sem[masks[k]] >= 1).all() and (sem[masks[k]] <= 3).all()
        inside = (batch["image"][row] != 0).any(0)
        assert (sem[~inside] == 255).all() and (sem[inside] != 255).all()
        assert (sem == 255).any()  # fit="shorter" on a square canvas always pads


def _masks_within_boxes(batch, loader) -> None:
    """Each mask lies within its box, up to one file pixel scaled to the output."""
    modality = loader._engine.modality
    for row, (index, n) in enumerate(zip(batch["index"].tolist(), batch["num_boxes"].tolist(),
                                         strict=True)):
        g = modality.geometry(0, [index], None)
        slack = 1 + float((g.resized[0] / g.window[0, 2:]).max())
        for k in range(n):
            ys, xs = torch.nonzero(batch["masks"][row, k], as_tuple=True)
            assert len(ys) > 0
            x1, y1, x2, y2 = batch["boxes"][row, k].tolist()
            assert xs.min() >= x1 - slack and xs.max() + 1 <= x2 + slack
            assert ys.min() >= y1 - slack and ys.max() + 1 <= y2 + slack


def test_every_box_is_kept_or_counted_as_dropped(folder):
    src = DetectionSource(folder)
    loader = _loader(folder, "dali", seed=1, scale=(0.05, 0.3))
    dropped = 0
    for b in loader:
        for i, n, d in zip(b["index"].tolist(), b["num_boxes"].tolist(),
                           b["dropped_boxes"].tolist(), strict=True):
            assert n + d == len(src.ann_ids[src.rows(i)])
            dropped += d
    assert dropped > 0  # small crops lose boxes, visibly


def test_eval_round_trip_gives_ap_1_with_cocoeval(folder, backend):
    """Eval boxes mapped back to file pixels, scored 1, evaluated by pycocotools against
    the JSON: AP = 1.0 (a wrong scale, offset or label would lose it)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    loader = _loader(folder, backend, train=False, shuffle=False)
    ids = loader._engine.modality.category_ids
    dets = [{"image_id": iid, "category_id": int(ids[label]), "score": 1.0,
             "bbox": [x1, y1, x2 - x1, y2 - y1]}
            for iid, (boxes, labels) in _unmapped(_all(loader)).items()
            for (x1, y1, x2, y2), label in zip(boxes.tolist(), labels.tolist(), strict=True)]
    gt = COCO(str(folder / "instances.json"))
    evaluation = COCOeval(gt, gt.loadRes(dets), "bbox")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    assert evaluation.stats[0] == pytest.approx(1.0)  # AP @ IoU 0.50:0.95
    dets[0]["bbox"][0] += 3  # and the check can fail: one box off by 3 px
    worse = COCOeval(gt, gt.loadRes(dets), "bbox")
    worse.evaluate(), worse.accumulate(), worse.summarize()
    assert worse.stats[0] < 1.0


def test_file_written_by_pycocotools_and_folder_read_by_torchvision(folder, tmp_path):
    """pycocotools writes a COCO file (loadRes of boxes); we load it. torchvision's
    CocoDetection reads our folder; its boxes are ours, mapped back."""
    from pycocotools.coco import COCO
    from torchvision.datasets import CocoDetection
    gt = COCO(str(folder / "instances.json"))
    rng = np.random.default_rng(0)
    dets = [{"image_id": img["id"], "category_id": int(rng.choice([1, 3, 7])), "score": 0.5,
             "bbox": [float(v) for v in (rng.uniform(0, 30), rng.uniform(0, 30),
                                         rng.uniform(5, 40), rng.uniform(5, 40))]}
            for img in gt.dataset["images"] for _ in range(2)]
    written = gt.loadRes(dets).dataset
    copy = shutil.copytree(folder, tmp_path / "c")
    (copy / "written.json").write_text(json.dumps(written))
    ours = _unmapped(_all(_loader(copy, "dali", train=False, annotations="written.json")))
    for det in dets:
        boxes, _ = ours[det["image_id"]]
        x, y, w, h = det["bbox"]
        assert np.isclose(boxes, [x, y, x + w, y + h], atol=1e-3).all(axis=1).any()
    reader = CocoDetection(str(folder), str(folder / "instances.json"))
    mine = _unmapped(_all(_loader(folder, "torch", train=False)))
    for k in range(len(reader)):
        _, anns = reader[k]
        want = [[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2],
                 a["bbox"][1] + a["bbox"][3]] for a in anns if not a["iscrowd"]]
        iid = reader.ids[k]
        np.testing.assert_allclose(mine[iid][0], np.reshape(want, (-1, 4)), atol=1e-3)


def test_bad_options_fail_when_the_loader_is_made(folder):
    for option, value, match in (("min_iou", 2.0, r"min_iou=2.0: expected a number in"),
                                 ("fit", "cover", "fit='cover'"),
                                 ("crowd", "ignore", "crowd must be"),
                                 ("masks", 1, "masks")):
        with pytest.raises((ValueError, TypeError), match=match):
            _loader(folder, "dali", **{option: value})
    with pytest.raises(ValueError, match="unknown option"):
        _loader(folder, "dali", mixup=0.2)


def test_readme_conversion_trains_faster_rcnn_one_step(folder):
    """The README's one-line conversion feeds torchvision's Faster R-CNN (CPU, tiny)."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    loader = _loader(folder, "dali", batch_size=2, seed=0)
    assert loader.classes == ["box", "ellipse", "triangle"]  # label order: COCO ids 1, 3, 7
    assert loader._engine.modality.category_ids.tolist() == [1, 3, 7]
    batch = next(iter(loader))
    targets = [{"boxes": b[:n], "labels": l[:n] + 1} for b, l, n in  # noqa: E741 (README's)
               zip(batch["boxes"], batch["labels"], batch["num_boxes"], strict=True)]
    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=len(loader.classes) + 1,
        min_size=SIZE, max_size=SIZE)
    model.train()
    losses = model(list(batch["image"]), targets)
    loss = sum(losses.values())
    loss.backward()
    assert torch.isfinite(loss) and set(losses) >= {"loss_classifier", "loss_box_reg"}
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_annotation_without_segmentation_is_a_bad_sample_with_masks(folder, tmp_path,
                                                                      backend):
    copy = shutil.copytree(folder, tmp_path / "c")
    doc = json.loads((copy / "instances.json").read_text())
    victim = next(a for a in doc["annotations"] if a["image_id"] == 30 and not a["iscrowd"])
    del victim["segmentation"]
    (copy / "instances.json").write_text(json.dumps(doc))
    assert len(list(_loader(copy, backend))) == 3  # without masks nothing needs it
    loader = _loader(copy, backend, masks=True, on_error="skip", shuffle=False)
    seen = [i for b in loader for i in b["index"].tolist()]
    assert seen == [0, 1, 3, 4, 5, 6, 7, 8]
    assert [(s.index, bool(re.search(rf"annotation {victim['id']}\.segmentation: missing",
                                     s.reason))) for s in loader.skipped] == [(2, True)]


@pytest.mark.gpu
def test_gpu_graph_matches_the_cpu_backend(folder):
    """On a GPU: nvJPEG + GPU resize against DALI's CPU backend on the same plan."""
    cpu, gpu = (_all(_loader(folder, "dali", seed=2, masks=True, device=d))
                for d in ("cpu", "cuda"))
    for a, b in zip(cpu, gpu, strict=True):
        for name in a:
            got = b[name].cpu()
            if name == "image":
                assert (a[name] - got).abs().mean() < 0.05
            else:
                assert torch.equal(a[name], got), name


def test_a_batch_without_boxes_has_n_zero(folder, tmp_path, backend):
    copy = shutil.copytree(folder, tmp_path / "c")
    doc = json.loads((copy / "instances.json").read_text())
    doc["annotations"] = []
    (copy / "instances.json").write_text(json.dumps(doc))
    batch = next(iter(_loader(copy, backend, masks=True, semantic=True)))
    assert batch["boxes"].shape == (4, 0, 4) and batch["masks"].shape == (4, 0, SIZE, SIZE)
    assert batch["labels"].shape == batch["box_valid"].shape == (4, 0)
    assert batch["num_boxes"].tolist() == [0] * 4
    assert set(torch.unique(batch["semantic"]).tolist()) <= {0, 255}



_CRASH_PROBE = """
import sys
from torch_bridge import make_loader
from dali_pipes.formats import FormatError
for data in sys.argv[1:]:
    for backend in ("dali", "torch"):
        extra = {"reference": {"num_workers": 0}} if backend == "torch" else {}
        try:
            loader = make_loader("detection", data, backend=backend, batch_size=4, size=32,
                                 masks=True, on_error="skip", **extra)
            print(backend, "batches", sum(1 for _ in loader), "skipped", len(loader.skipped))
        except FormatError as exc:
            print(backend, "FormatError", exc)
        sys.stdout.flush()
"""
_CRASHERS = [  # (segmentation, field, message); RLE sizes are filled in with the image's
    ([[0, 0, 1e12, 0, 0, 1e12]], r"segmentation\[0\]", "outside the"),
    ([[0, 0, -1e9, 5, 3, -1e9]], r"segmentation\[0\]", "outside the"),
    ([[0, 0, float("nan"), 5, 3, 7]], r"segmentation\[0\]", "not all finite"),
    ({"counts": [-5]}, r"segmentation\.counts", "non-negative"),
    ({"counts": "zzzzzzzz"}, r"segmentation\.counts", "outside '0'..'o'"),
]


def test_a_polygon_or_rle_that_crashes_the_rasteriser_fails_the_file_on_open(folder,
                                                                             tmp_path):
    """pycocotools segfaults on huge polygons, hangs on NaN, raises OverflowError on
    negative runs and writes past the mask for runs that do not add up: the file is refused
    when the loader is made, on both backends, also under on_error="skip" (one child
    process for all cases, so that a crash fails this test, not pytest)."""
    import subprocess
    import sys
    folders, victims = [], []
    for k, (segmentation, _, _) in enumerate(_CRASHERS):
        copy = shutil.copytree(folder, tmp_path / f"c{k}")
        doc = json.loads((copy / "instances.json").read_text())
        victim = next(a for a in doc["annotations"] if a["image_id"] == 30
                      and not a["iscrowd"])
        image = next(i for i in doc["images"] if i["id"] == 30)
        hw = [image["height"], image["width"]]
        if isinstance(segmentation, dict):
            counts = segmentation["counts"]
            segmentation = {"size": hw, "counts": counts if isinstance(counts, str)
                            else [-5, hw[0] * hw[1] + 5]}
        victim["segmentation"] = segmentation
        (copy / "instances.json").write_text(json.dumps(doc))
        folders.append(str(copy))
        victims.append(victim["id"])
    run = subprocess.run([sys.executable, "-c", _CRASH_PROBE, *folders], capture_output=True,
                         text=True, timeout=300)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0, f"exit {run.returncode} after {lines}: {run.stderr[-2000:]}"
    assert len(lines) == 2 * len(_CRASHERS), run.stdout
    for k, (_, field, message) in enumerate(_CRASHERS):
        for backend, line in zip(("dali", "torch"), lines[2 * k: 2 * k + 2], strict=True):
            assert re.match(rf"{backend} FormatError .*instances\.json: annotation "
                            rf"{victims[k]}\.{field}: .*{message}", line), line
