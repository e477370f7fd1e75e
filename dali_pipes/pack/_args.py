"""The pack tool's arguments: their ranges, their checks and the command line's parser."""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dali_pipes.cli import json_object
from dali_pipes.pack._members import MODALITIES
from dali_pipes.stores.remote import is_url

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


def check_paths(src, dst, store=None) -> None:
    """PackArgumentError for a missing local SRC, a local DST that is a file, or a DST
    inside SRC (its folder would be listed as a class on the next run). SRC in `store`
    (a store handed in) is checked by the store's listing."""
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    if store is None and not is_url(src_s):
        source = Path(src_s)
        if not source.is_dir():
            raise PackArgumentError(f"SRC {src}: " + ("not a folder" if source.exists()
                                                     else "does not exist"))
    if not is_url(dst_s) and Path(dst_s).exists() and not Path(dst_s).is_dir():
        raise PackArgumentError(f"DST {dst}: is a file, expected a folder")
    if store is None and _inside(src_s, dst_s):
        raise PackArgumentError(f"DST {dst} is inside SRC {src}: pack into a folder "
                                "outside it")


def _inside(src: str, dst: str) -> bool:
    """Whether `dst` is `src` or a folder under it (both local, or both URLs)."""
    if is_url(src) != is_url(dst):
        return False
    if is_url(src):
        root, out = src.rstrip("/"), dst.rstrip("/")
        return out == root or out.startswith(root + "/")
    source, target = Path(src).resolve(), Path(dst).resolve()
    return target == source or source in target.parents


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
    parser.add_argument("src", help="a folder of class folders of images (or of what "
                                    "--modality names): local, or a URL (s3://...)")
    parser.add_argument("dst", help="the output folder, local (created) or a URL "
                                    "(s3://...); not inside SRC")
    parser.add_argument("--shard-size", type=_int("shard_size"), default=DEFAULT_SHARD_SIZE,
                        metavar="BYTES", help="the most image bytes per shard (256 MiB)")
    parser.add_argument("--max-side", type=_int("max_side"), default=None, metavar="N",
                        help="re-encode images whose longer side exceeds N as JPEGs this "
                             "large (None: copy files as they are)")
    parser.add_argument("--quality", type=_int("quality"), default=90, metavar="Q",
                        help="JPEG quality 1..100 of re-encoded images (with --max-side)")
    parser.add_argument("--part", type=_part, default="0/1", metavar="i/N",
                        help="write every N-th shard starting at i (one of N machines)")
    parser.add_argument("--workers", type=_int("workers"), default=None, metavar="W",
                        help="shards written at once: processes of this machine (--engine "
                             "local; None: 1) or Ray tasks (--engine ray; None: one per CPU "
                             "of the cluster)")
    parser.add_argument("--shuffle", type=_int("shuffle"), default=None, metavar="SEED",
                        help="write the samples in a seeded permutation (mixes classes "
                             "within shards, for order='shards'; None: SRC's order)")
    parser.add_argument("--modality", default="image",
                        choices=MODALITIES,
                        help="what SRC holds: class folders of images, videos (fusion: with "
                             "<stem>.imu.csv), frame folders, or an images folder with its "
                             "COCO instances.json (hyperspectral scenes are refused: cubes "
                             "stay files)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="where shards are written: this machine, or a Ray cluster (one "
                             'task per shard; pip install "dali-pipes[ray]")')
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="the Ray cluster (--engine ray; None: RAY_ADDRESS, else a local "
                             "Ray started and stopped by the tool)")
    parser.add_argument("--storage-options", type=json_object, default=None, metavar="JSON",
                        help="fsspec options for SRC and DST URLs, a JSON object (e.g. "
                             '\'{"client_kwargs": {"endpoint_url": "http://..."}}\')')
    parser.add_argument("--overwrite", action="store_true", default=False,
                        help="delete what the pack tool wrote in DST and start over "
                             "(needed when DST was packed with other options or another SRC)")
    return parser


_NUMBER = re.compile(r"-\d+|-\d*\.\d+")  # argparse's negative numbers: values, not options


def parse_args(parser: argparse.ArgumentParser,
               argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, except that an unknown option is an error naming it and
    the closest known one (argparse would take the option's value as SRC and report
    "required: dst"), and an option's value starting with "-" (`--part -1/2`) reaches the
    option's own check (argparse would report "expected one argument")."""
    argv = list(sys.argv[1:] if argv is None else argv)
    actions = parser._option_string_actions  # argparse's table: option string -> action
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            out += argv[i - 1:]
            break
        if not _is_option(token):
            out.append(token)
            continue
        name, eq, _ = token.partition("=")
        action = _known(actions, name)
        if action is None:
            parser.error(_unknown(name, actions))
        if not eq and action.nargs is None and i < len(argv) and _is_option(argv[i]) \
                and not argv[i].startswith("--") and _known(actions, argv[i]) is None:
            token = f"{token}={argv[i]}"  # "-1/2" is the value, not an option
            i += 1
        out.append(token)
    return parser.parse_args(out)


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.fullmatch(token)


def _known(actions: dict[str, argparse.Action], name: str) -> argparse.Action | None:
    """The action of option `name`, or of the options it abbreviates (argparse itself
    reports an abbreviation of several); None for an unknown option."""
    if name in actions:
        return actions[name]
    if name.startswith("--"):
        return next((a for s, a in actions.items() if s.startswith(name)), None)
    return None


def _unknown(name: str, actions: dict[str, argparse.Action]) -> str:
    options = sorted(s for s in actions if s.startswith("--"))
    close = difflib.get_close_matches(name, options, n=1)
    return f"unrecognized option {name}: " + (f"did you mean {close[0]}?" if close else
                                               f"the options are {', '.join(options)}")
