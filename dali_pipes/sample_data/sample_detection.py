"""Detection data: images with drawn shapes and their COCO instances file.

Each image (photographic-statistics background, `dali_pipes.sample_data.sample_images.photo_like`)
holds a few
filled shapes of three categories (COCO ids 1 "box", 3 "ellipse", 7 "triangle": not
contiguous on purpose). Their annotations carry real segmentations written with
pycocotools.mask: rectangles and triangles as polygons, ellipses as compressed RLE
(`mask.encode`) or, every other one, uncompressed RLE (a counts list); some images have a
crowd annotation (iscrowd 1, RLE) and one has none at all.

`write_detection_folder(root, ...)` writes the JPEGs into `root` with `root/instances.json`
beside them; `detection_dataset()` is the built-in
benchmark set (cached), `tiny(root, source)` the tests' tiny one (the registry names both).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from dali_pipes.sample_data.sample_images import cache_root, encode_jpeg, photo_like

CATEGORIES: tuple[dict[str, Any], ...] = (
    {"id": 1, "name": "box"}, {"id": 3, "name": "ellipse"}, {"id": 7, "name": "triangle"})


def _shape(rng: np.random.Generator, h: int, w: int, kind: int):
    """(mask uint8 (h, w), polygon or None, bbox [x, y, w, h]) of one random shape."""
    from PIL import Image, ImageDraw
    bw = float(rng.uniform(0.15, 0.5) * w)
    bh = float(rng.uniform(0.15, 0.5) * h)
    x0 = float(rng.uniform(0, w - bw))
    y0 = float(rng.uniform(0, h - bh))
    canvas = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(canvas)
    if kind == 0:
        poly = [x0, y0, x0 + bw, y0, x0 + bw, y0 + bh, x0, y0 + bh]
    elif kind == 2:
        poly = [x0 + bw / 2, y0, x0 + bw, y0 + bh, x0, y0 + bh]
    else:
        poly = None
    if poly is None:
        draw.ellipse([x0, y0, x0 + bw, y0 + bh], fill=1)
    else:
        draw.polygon(poly, fill=1)
    return np.asarray(canvas, np.uint8), poly, [round(x0, 2), round(y0, 2), round(bw, 2),
                                                 round(bh, 2)]


def _annotation(mask, poly, bbox, *, aid: int, iid: int, cid: int, crowd: bool,
                compressed: bool) -> dict:
    from pycocotools import mask as mask_utils
    if poly is not None and not crowd:
        seg: object = [[round(v, 2) for v in poly]]
    else:
        rle = mask_utils.encode(np.asfortranarray(mask))
        if compressed:
            seg = {"size": list(rle["size"]), "counts": rle["counts"].decode("ascii")}
        else:  # uncompressed: run lengths in column-major order
            flat = mask.flatten(order="F")
            change = np.flatnonzero(np.diff(flat)) + 1
            runs = np.diff(np.concatenate([[0], change, [flat.size]]))
            counts = ([0] if flat[0] else []) + runs.tolist()
            seg = {"size": list(mask.shape), "counts": counts}
    return {"id": aid, "image_id": iid, "category_id": cid, "bbox": bbox,
            "area": float(mask.sum()), "iscrowd": int(crowd), "segmentation": seg}


def write_detection_folder(root: Path, *, n_images: int, seed: int = 0,
                           sizes=((96, 128), (120, 90), (100, 100)), max_shapes: int = 4,
                           quality: int = 90) -> Path:
    """Write `root/img_XXXX.jpg` and `root/instances.json` (image ids 10, 20, ... in a
    shuffled order in the file; the loader sorts them).

    Args:
        root: the folder (created).
        n_images: images in all; image 1 has no annotation, every third a crowd one.
        seed: the pixels' and shapes' seed.
        sizes: (height, width) in turn.
        max_shapes: at most this many shapes per image (at least one, image 1 aside).
        quality: JPEG quality.

    Returns:
        `root`.
    """
    from PIL import Image, ImageDraw
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    images: list[dict] = []
    anns: list[dict] = []
    for i in range(n_images):
        h, w = sizes[i % len(sizes)]
        iid = 10 * (i + 1)
        pixels = photo_like(rng, h, w)
        image = Image.fromarray(pixels)
        draw = ImageDraw.Draw(image)
        count = 0 if i == 1 else int(rng.integers(1, max_shapes + 1))
        for k in range(count + (i % 3 == 2)):
            crowd = k == count
            kind = int(rng.integers(0, 3))
            mask, poly, bbox = _shape(rng, h, w, kind)
            colour = tuple(int(c) for c in rng.integers(0, 256, 3))
            if poly is None:
                x, y, bw, bh = bbox
                draw.ellipse([x, y, x + bw, y + bh], fill=colour)
            else:
                draw.polygon(poly, fill=colour)
            anns.append(_annotation(mask, poly, bbox, aid=len(anns) + 1, iid=iid,
                                    cid=CATEGORIES[kind]["id"], crowd=crowd,
                                    compressed=len(anns) % 2 == 0))
        name = f"img_{i:04d}.jpg"
        (root / name).write_bytes(encode_jpeg(np.asarray(image), quality=quality))
        images.append({"id": iid, "file_name": name, "height": h, "width": w})
    order = rng.permutation(len(images))
    doc = {"images": [images[k] for k in order], "annotations": anns,
           "categories": list(CATEGORIES)}
    (root / "instances.json").write_text(json.dumps(doc))
    return root


def tiny(root: Path, source: int) -> Path:
    """10 (source 0) or 6 (source 1) images of about 100x100 pixels (tests)."""
    return write_detection_folder(root, n_images=(10, 6)[source], seed=5 + source)


def detection_dataset(*, n_images: int = 256, size=(375, 500), root: Path | None = None,
                      seed: int = 0, progress=None) -> Path:
    """Create (once) and return the built-in detection benchmark set: `n_images` JPEGs of
    (about) `size` with up to 6 shapes each and `instances.json`."""
    key = hashlib.sha1(repr((n_images, size, seed, 1)).encode()).hexdigest()[:10]
    base = (root or cache_root()) / f"detection-{n_images}x{size[1]}x{size[0]}-{key}"
    done = base / ".complete"
    if done.exists():
        return base
    h, w = size
    write_detection_folder(base, n_images=n_images, seed=seed, max_shapes=6,
                           sizes=((h, w), (w, h), (h, h)))
    if progress is not None:
        progress(n_images, n_images)
    done.write_text("ok\n")
    return base
