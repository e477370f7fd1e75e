"""The pack tool's arguments: their ranges, their checks and the command line's parser."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from dali_pipes.pack._members import MODALITIES

DEFAULT_SHARD_SIZE = 256 << 20

# Each integer option's accepted range (inclusive): JPEG sides stop at 65535; shards under a
# KiB or over a TiB are mistakes (a wrong unit), not plans.
LIMITS = {"shard_size": (1 << 10, 1 << 40), "max_side": (1, 65535), "quality": (1, 100),
          "workers": (1, 1024), "shuffle": (0, (1 << 63) - 1)}


class PackArgumentError(ValueError):
    """An argument of the pack tool is out of range or names the wrong thing."""


def check_option(name: str, value) -> int:
    """`value` of option `name` (a key of LIMITS) if it is an int in range, else
    PackArgumentError naming the option and the range."""
    lo, hi = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not lo <= value <= hi:
        raise PackArgumentError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return int(value)


def check_part(part) -> tuple[int, int]:
    """(i, N) with 0 <= i < N, else PackArgumentError."""
    try:
        i, n = (int(v) for v in part)
    except (TypeError, ValueError) as exc:
        raise PackArgumentError(f"part must be (i, N), got {part!r}") from exc
    if not 0 <= i < n:
        raise PackArgumentError(f"part {i}/{n}: expected 0 <= i < N")
    return i, n


def check_paths(src, dst) -> Path:
    """DST as a Path; PackArgumentError for a missing SRC, a DST that is a file or one
    inside SRC (its folder would be listed as a class on the next run)."""
    source, out = Path(src), Path(dst)
    if not source.is_dir():
        raise PackArgumentError(f"SRC {src}: " + ("not a folder" if source.exists()
                                                 else "does not exist"))
    if out.exists() and not out.is_dir():
        raise PackArgumentError(f"DST {dst}: is a file, expected a folder")
    inside = out.resolve() == source.resolve() or source.resolve() in out.resolve().parents
    if inside:
        raise PackArgumentError(f"DST {dst} is inside SRC {src}: pack into a folder "
                                "outside it")
    return out


def _part(text: str) -> tuple[int, int]:
    try:
        return check_part(int(v) for v in text.split("/", 1)) if "/" in text else \
            check_part(None)
    except (ValueError, PackArgumentError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected i/N with 0 <= i < N, "
                                         "e.g. 0/4") from exc


def _int(name: str):
    """An argparse type: an integer in LIMITS[name] (argparse names the option)."""
    def parse(text: str) -> int:
        try:
            return check_option(name, int(text))
        except ValueError as exc:
            lo, hi = LIMITS[name]
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer in {lo}..{hi}"
                                             ) from exc
    return parse


def parser(description: str) -> argparse.ArgumentParser:
    """The command line's parser; every option's help shows its default."""
    parser = argparse.ArgumentParser(
        prog="python -m dali_pipes.pack", description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("src", help="a local folder of class folders of images (or of what "
                                    "--modality names)")
    parser.add_argument("dst", help="the output folder (created; not inside SRC)")
    parser.add_argument("--shard-size", type=_int("shard_size"), default=DEFAULT_SHARD_SIZE,
                        metavar="BYTES", help="the most image bytes per shard (256 MiB)")
    parser.add_argument("--max-side", type=_int("max_side"), default=None, metavar="N",
                        help="re-encode images whose longer side exceeds N as JPEGs this "
                             "large (None: copy files as they are)")
    parser.add_argument("--quality", type=_int("quality"), default=90, metavar="Q",
                        help="JPEG quality 1..100 of re-encoded images (with --max-side)")
    parser.add_argument("--part", type=_part, default="0/1", metavar="i/N",
                        help="write every N-th shard starting at i (one of N machines)")
    parser.add_argument("--workers", type=_int("workers"), default=1, metavar="W",
                        help="processes encoding shards")
    parser.add_argument("--shuffle", type=_int("shuffle"), default=None, metavar="SEED",
                        help="write the samples in a seeded permutation (mixes classes "
                             "within shards, for order='shards'; None: SRC's order)")
    parser.add_argument("--modality", default="image",
                        choices=MODALITIES,
                        help="what SRC holds: class folders of images, videos (fusion: with "
                             "<stem>.imu.csv), frame folders, or an images folder with its "
                             "COCO instances.json (hyperspectral scenes are refused: cubes "
                             "stay files)")
    parser.add_argument("--overwrite", action="store_true", default=False,
                        help="delete what the pack tool wrote in DST and start over "
                             "(needed when DST was packed with other options or another SRC)")
    return parser
