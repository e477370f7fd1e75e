"""Validation of COCO "segmentation" values before any reaches pycocotools' rasteriser.

pycocotools' C code trusts its input: a polygon with huge coordinates (1e9) or a negative
one far outside the image crashes the process (SIGSEGV) and a NaN one never returns; RLE run
lengths that do not add up to height x width write past the mask (garbage, or a crash), and
negative ones raise OverflowError. None of that can be caught per sample, so `open_coco`
checks every segmentation when the file is opened, as it checks boxes:

- polygons: lists of at least 3 x, y pairs (6 numbers, an even count) of finite numbers
  within `POLYGON_REACH` image sizes of the image, i.e. x in [-w, 2w] and y in [-h, 2h]
  with the default 1.0 (annotation tools clip to the image or leave a few pixels out;
  a bounded span also bounds the rasteriser's memory, which grows with the edges' length);
- RLE: "size" the image's [height, width] (integers); "counts" a list of non-negative
  integers, or COCO's compressed string (characters '0'..'o', every number complete),
  whose run lengths are non-negative and add up to height x width.

`check_segmentation` raises `FormatError` naming the file, the annotation and the field.
"""
from __future__ import annotations

import math

import numpy as np

from dali_pipes.formats.errors import FormatError

POLYGON_REACH = 1.0  # polygon coordinates may lie this many image sizes outside the image
_MAX_DIGITS = 7  # characters of one compressed number: 35 bits, beyond any image's runs


def check_segmentation(path: str, entry: str, seg, h: int, w: int) -> None:
    """FormatError (file, `entry`.segmentation...) unless `seg` is None, valid polygons
    or valid RLE for an h x w image."""
    field = f"{entry}.segmentation"
    if seg is None:
        return
    if isinstance(seg, list):
        for k, poly in enumerate(seg):
            _check_polygon(path, f"{field}[{k}]", poly, h, w)
        return
    if isinstance(seg, dict):
        _check_rle(path, field, seg, h, w)
        return
    raise FormatError(path, field, "neither polygons nor RLE", value=type(seg).__name__)


def _check_polygon(path: str, field: str, poly, h: int, w: int) -> None:
    if not isinstance(poly, list) or len(poly) < 6 or len(poly) % 2 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in poly):
        raise FormatError(path, field, "a polygon is not a list of at least 3 x, y pairs",
                          value=poly if not isinstance(poly, list) else f"{len(poly)} values")
    xy = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    if not np.isfinite(xy).all():
        raise FormatError(path, field, "polygon coordinates are not all finite",
                          value=[v for v in poly if not math.isfinite(v)][:3])
    r = POLYGON_REACH
    lo, hi = np.array([-r * w, -r * h]), np.array([(1 + r) * w, (1 + r) * h])
    bad = ((xy < lo) | (xy > hi)).any(axis=1)
    if bad.any():
        raise FormatError(path, field, f"polygon point outside the {w}x{h} image by more "
                          f"than {r:g} image size", value=xy[bad][0].tolist(),
                          expected=f"x in [{lo[0]:g}, {hi[0]:g}], y in [{lo[1]:g}, {hi[1]:g}]")


def _check_rle(path: str, field: str, seg: dict, h: int, w: int) -> None:
    size, counts = seg.get("size"), seg.get("counts")
    if size != [h, w] or not all(type(v) is int for v in size):
        raise FormatError(path, f"{field}.size", "not the image's [height, width]",
                          value=size, expected=[h, w])
    if isinstance(counts, list):
        if not all(type(v) is int and v >= 0 for v in counts):
            bad = next(v for v in counts if type(v) is not int or v < 0)
            raise FormatError(path, f"{field}.counts", "a run length is not a non-negative "
                              "integer", value=bad)
        runs = counts
    elif isinstance(counts, str):
        runs = rle_string_counts(path, f"{field}.counts", counts)
    else:
        raise FormatError(path, f"{field}.counts", "not an RLE string or list",
                          value="absent" if counts is None else type(counts).__name__)
    if sum(runs) != h * w:
        raise FormatError(path, f"{field}.counts", "run lengths do not add up to "
                          "height x width", value=sum(runs), expected=h * w)


def rle_string_counts(path: str, field: str, text: str) -> list[int]:
    """The run lengths of COCO's compressed RLE string (pycocotools' rleFrString: numbers
    of 5-bit groups in characters '0' + 0..63, bit 0x20 'more follows', bit 0x10 of the
    last the sign; from the third on, each adds the one two before it). FormatError for a
    character outside '0'..'o', a number cut short or too long, or a negative run."""
    runs: list[int] = []
    p, n = 0, len(text)
    while p < n:
        x, k, more = 0, 0, True
        while more:
            if p >= n or k >= _MAX_DIGITS:
                raise FormatError(path, field, "compressed RLE: a number is cut short or "
                                  "too long", value=f"at character {p}")
            c = ord(text[p]) - 48
            if not 0 <= c < 64:
                raise FormatError(path, field, "compressed RLE: a character outside '0'..'o'",
                                  value=f"{text[p]!r} at character {p}")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p, k = p + 1, k + 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        if len(runs) > 2:
            x += runs[-2]
        if x < 0:
            raise FormatError(path, field, "compressed RLE: a negative run length",
                              value=f"{x} (run {len(runs)})")
        runs.append(x)
    return runs
