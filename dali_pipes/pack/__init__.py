"""`python -m dali_pipes.pack SRC DST [--modality M]`: a data set into WebDataset shards.

Writes `DST/shard-000000.tar`, ... (members `<key>.<ext>` + `<key>.cls`, keys the sample's
index in SRC's listing, labels its class id), an index beside each shard and a manifest
(`manifest.json`, or `manifest-part-I-of-N.json` with `--part`) with the classes, the
samples per class and each shard's samples, bytes and sha256. Loading DST gives the same
samples, labels and order as loading SRC (the same crops too, unless `--max-side` resized).

`--shuffle SEED` writes the samples in a seeded permutation of SRC's order instead (keys stay
SRC's indices, so sample i of DST is SRC's sample `int(key)`): class folders are listed class
after class, so without it each shard holds one or two classes, which `order="shards"` (a
few shards at a time per rank) turns into batches of few classes.

Deterministic (the same SRC and options give the same bytes), resumable only under the same
plan (SRC's listing, the options that change bytes, the tool's version; another plan is
refused unless `--overwrite`, see `dali_pipes.pack._resume`), locked (a second packer of the
same DST and part fails at once), parallel (`--workers`), and `--part i/N` writes every N-th
shard starting at i, so N machines share the work without talking.

The pack tool writes, replaces and deletes only its own files in DST, recognised by
content (`dali_pipes.pack._owned`: its JSON files carry `"written_by": "dali_pipes.pack"`);
a DST holding a file of one of its names that it did not write (a user's `manifest.json` or
`categories.json`, another program's `shard-000000.tar`) is refused, `--overwrite` included.
Its lock files are removed when it ends.

`--modality video|fusion|frames|detection` packs those sources the same way (same plan,
resume, locks, manifest with class names), in the layouts of `dali_pipes.pack._members`;
`--max-side` applies to images only, and hyperspectral scenes are refused (cubes stay files).

SRC and DST may each be a local folder or a URL (`s3://...`, any fsspec protocol; SRC also a
path in a store handed in: `PackRun.store`), and the shards may be written by this machine
(`--engine local`) or by a Ray cluster (`--engine ray`: one task per shard, writing straight
to DST; `dali_pipes.pack._engines`). Either way the driver lists SRC once, plans the shards,
holds DST's locks and writes the manifest last, and the shards, members, bytes and records
are the same.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from dali_pipes.option_groups import closest
from dali_pipes.pack._args import (
    DEFAULT_SHARD_SIZE,
    PackArgumentError,
    check_option,
    check_part,
    check_paths,
    parse_args,
)
from dali_pipes.pack._args import parser as cli_parser
from dali_pipes.pack._engines import PackTaskFailed, check_ray, run_local, run_ray
from dali_pipes.pack._locks import locked
from dali_pipes.pack._members import MODALITIES, MemberPacker, member_packer
from dali_pipes.pack._owned import clean, dump_json, refuse_foreign
from dali_pipes.pack._progress import Progress, Totals
from dali_pipes.pack._resume import PackRefused, claim_plan, make_plan, shard_state
from dali_pipes.pack._shard import ShardJob
from dali_pipes.stores import Store
from dali_pipes.stores.destination import Destination, open_destination
from dali_pipes.stores.options import StoreOptions
from dali_pipes.stores.remote import is_url
from dali_pipes.stores.select import resolve_store
from dali_pipes.stores.shard_writer import part_shards, plan_shards, shard_name

__all__ = ["PackArgumentError", "PackRefused", "PackRun", "PackTaskFailed", "main", "pack",
           "sample_order"]


@dataclass(frozen=True)
class PackRun:
    """How and where a pack runs (the command line's `--engine`, `--ray-address`,
    `--storage-options`).

    Args:
        engine: "local" (this machine: `workers` processes) or "ray" (a Ray cluster: one
            task per shard).
        ray_address: the cluster's address (None: `RAY_ADDRESS`, else a local Ray started
            and stopped by the tool).
        storage_options: fsspec options for SRC and DST URLs (credentials, endpoint_url...).
        store: SRC's store (any `dali_pipes.stores.Store`): SRC is then a path in it.
    """

    engine: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    storage_options: dict | None = field(default=None, hash=False)
    store: Store | None = field(default=None, hash=False, compare=False)

    def __post_init__(self):
        if self.engine not in ("local", "ray"):
            raise PackArgumentError(f"engine must be 'local' or 'ray', got {self.engine!r}")
        if self.ray_address is not None and self.engine != "ray":
            raise PackArgumentError("ray_address (--ray-address) is for engine='ray'")
        if self.storage_options is not None and not isinstance(self.storage_options, dict):
            raise PackArgumentError(f"storage_options must be a dict, got "
                                    f"{type(self.storage_options).__name__}")


def pack(src, dst, *, shard_size: int = DEFAULT_SHARD_SIZE, max_side: int | None = None,
         quality: int = 90, part: tuple[int, int] = (0, 1), workers: int | None = None,
         shuffle: int | None = None, progress: bool | None = None,
         overwrite: bool = False, modality: str = "image", **run_options: Any) -> dict:
    """Write the class folders of `src` as shards into `dst` (see the module doc).

    Args:
        src: a folder of class folders of images (local, a URL, or a path in `run.store`).
        dst: the output folder, local (created) or a URL.
        shard_size: the most image bytes (as read from SRC) per shard.
        max_side: re-encode images whose longer side exceeds this as JPEGs this large.
        quality: the JPEG quality of re-encoded images.
        part: (i, N): write every N-th shard starting at i.
        workers: shards written at once: processes of the local engine (None: 1), Ray
            tasks (None: as many as the cluster has CPUs).
        shuffle: a seed: write the samples in that permutation of SRC's order (None: in order).
        progress: rich progress bar (True), plain lines (False), or by terminal (None).
        overwrite: delete what the pack tool wrote in `dst` before and start over (else a
            `dst` written by another plan is refused: `PackRefused`).
        modality: what `src` holds: "image" (class folders of images), "video", "fusion",
            "frames" or "detection" (see `dali_pipes.pack._members`).
        run_options: the engine and the stores: `run=PackRun(...)`, or its fields as
            keywords (`engine="ray"`, `ray_address=`, `storage_options=`, `store=`); none:
            the local engine and the built-in stores.

    Returns:
        The manifest written. `PackArgumentError` (a ValueError) names a bad argument,
        `PackRefused` a destination this run must not write (another plan, another packer).
    """
    run = pack_run(run_options)
    options = {"shard_size": shard_size, "max_side": max_side, "quality": quality,
               "shuffle": shuffle}
    for name, value in (*options.items(), ("workers", workers)):
        if value is not None or name in ("shard_size", "quality"):
            check_option(name, value)
    part = check_part(part)
    if run.engine == "ray":
        check_ray()  # before anything is listed or written: the extra to install
    check_paths(src, dst, run.store)
    store, dest = _stores(src, dst, run)
    source = _source(src, modality, max_side, store)
    order = np.arange(len(source)) if shuffle is None else sample_order(len(source), shuffle)
    dest.make()
    with locked(dest, part, overwrite) as still_held:
        refuse_foreign(dest)
        gone = clean(dest, everything=overwrite)
        if gone:
            print(f"{dest}: deleted {len(gone)} files of the pack tool ("
                  + ("--overwrite" if overwrite else "temporary files of dead packers") + ")",
                  file=sys.stderr)
        plan = make_plan(source.listing_digest(), shard_size=shard_size, max_side=max_side,
                         quality=quality, shuffle=shuffle)
        if modality != "image":
            plan["modality"] = modality
        digest = claim_plan(dest, plan)
        for name, data in source.extra_files.items():
            dest.write(name, data)
        jobs, totals, shards = _jobs(source, dest, order, options, digest, part)
        aborted = dest.abort_uploads([job.name for job in jobs])
        if aborted:
            print(f"{dest}: aborted the incomplete uploads of {', '.join(aborted)} (writers "
                  "killed mid-shard)", file=sys.stderr)
        _run(jobs, source.store, dest, workers, run, Progress(totals, progress))
        clean(dest, everything=False)  # temporary files of workers killed meanwhile
        still_held()
        return _manifest(source, dest, shards, options, {**plan, "digest": digest}, part)


_PACK_KEYWORDS = tuple(p for p in inspect.signature(pack).parameters
                      if p not in ("src", "dst", "run_options"))


def pack_run(given: dict[str, Any]) -> PackRun:
    """The PackRun `pack`'s engine keywords name: `run=` a PackRun, or its fields as
    shorthands, not both; TypeError naming an unknown keyword (with the closest one)."""
    run, rest = given.get("run"), {k: v for k, v in given.items() if k != "run"}
    names = [f.name for f in fields(PackRun)]
    unknown = [k for k in rest if k not in names]
    if unknown:
        near = closest(unknown[0], [*names, "run", *_PACK_KEYWORDS])
        raise TypeError(f"pack() got an unexpected keyword argument {unknown[0]!r}"
                        + (f"; did you mean {near!r}?" if near else ""))
    if run is not None and not isinstance(run, PackRun):
        raise TypeError(f"run must be a PackRun, got {type(run).__name__}")
    if run is not None and rest:
        raise PackArgumentError(f"give run=PackRun(...) or {', '.join(rest)}, not both")
    return run or PackRun(**rest)


def _stores(src, dst, run: PackRun) -> tuple[Store, Destination]:
    """SRC's store and DST (storage options go to the URLs among them)."""
    url_options = StoreOptions(storage_options=run.storage_options)
    if run.storage_options is not None and not (is_url(os.fspath(src)) and run.store is None
                                                or is_url(os.fspath(dst))):
        raise PackArgumentError(f"storage_options apply to URLs; SRC {src} and DST {dst} "
                                "are not")
    try:
        store = resolve_store(os.fspath(src), run.store,
                              url_options if run.store is None and is_url(os.fspath(src))
                              else None)
        dest = open_destination(dst, run.storage_options if is_url(os.fspath(dst)) else None)
    except (TypeError, ValueError) as exc:
        raise PackArgumentError(str(exc)) from exc
    return store, dest


def _jobs(source: MemberPacker, dest: Destination, order: np.ndarray, options: dict,
          digest: str, part: tuple[int, int]
          ) -> tuple[list[ShardJob], Totals, tuple[int, list[int]]]:
    """The jobs of this part's shards still to write, its totals, and (shards in all, this
    part's shards)."""
    sizes = source.sizes[order]
    shards = plan_shards(sizes, options["shard_size"])
    mine = part_shards(len(shards), *part)
    pending = _pending(dest, mine, digest)
    resize = None if options["max_side"] is None else (options["max_side"],
                                                        options["quality"])
    jobs = [ShardJob(shard_name(j), [(f"{i:09d}", source.members(i))
                                     for i in order[shards.samples(j)].tolist()],
                     resize, digest, source.modality == "image") for j in pending]
    count = {j: len(shards.samples(j)) for j in mine}
    kept = [j for j in mine if j not in set(pending)]
    totals = Totals(len(mine), sum(count.values()), len(kept), sum(count[j] for j in kept))
    return jobs, totals, (len(shards), mine)


def _run(jobs: list[ShardJob], store: Store, dest: Destination, workers: int | None,
         run: PackRun, progress: Progress) -> None:
    try:
        if run.engine == "ray":
            run_ray(jobs, store, dest, workers, run.ray_address, progress)
        else:
            run_local(jobs, store, dest, workers or 1, progress)
    finally:
        progress.close()


def _pending(dest: Destination, mine: list[int], digest: str) -> list[int]:
    """The shards of `mine` to write: missing or damaged ones (said on stderr)."""
    listed = dest.names()
    pending = []
    for j in mine:
        state = shard_state(dest, shard_name(j), digest, listed)
        if state.startswith("damaged"):
            print(f"{dest.path(shard_name(j))}: {state}; writing it again", file=sys.stderr)
        if state != "done":
            pending.append(j)
    return pending


def _source(src, modality: str, max_side: int | None, store: Store) -> MemberPacker:
    if modality not in MODALITIES:
        raise PackArgumentError(f"modality must be one of {', '.join(MODALITIES)}, got "
                                f"{modality!r}")
    if modality != "image" and max_side is not None:
        raise PackArgumentError(f"--max-side re-encodes images; it does not apply to "
                                f"--modality {modality} (members are copied as they are)")
    try:
        return member_packer(src, modality, store)
    except (OSError, ValueError) as exc:
        raise PackArgumentError(f"SRC {src}: {exc}") from exc


def sample_order(n: int, seed: int) -> np.ndarray:
    """The order `--shuffle seed` writes n samples in: a permutation, a pure function of both."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"shuffle must be a seed (an int >= 0) or None, got {seed!r}")
    return np.random.default_rng([int(seed), 0x5041434B]).permutation(n)


def _manifest(source: MemberPacker, dest: Destination, shards_of: tuple[int, list[int]],
              options: dict, plan: dict, part: tuple[int, int]) -> dict:
    """Write this part's manifest (after every shard): classes, counts, shard records."""
    n_shards, mine = shards_of
    shards = [{"name": shard_name(j), **json.loads(dest.read(f"{shard_name(j)}.json"))}
              for j in mine]
    manifest = {"format": "webdataset", "classes": list(source.classes),
                "class_counts": list(source.class_counts), "samples": len(source),
                "shards_total": n_shards, "shards": shards, "options": options,
                "plan": plan}
    name = "manifest.json" if part[1] == 1 else f"manifest-part-{part[0]}-of-{part[1]}.json"
    dest.write(name, dump_json(manifest))
    return manifest


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module doc): exit 2 for a bad argument, 1 when DST is
    refused (written by another plan, or another packer holds it) or a SRC file cannot be
    read while packing (the message names it)."""
    parser = cli_parser(__doc__.split("\n\n")[0])
    args = parse_args(parser, argv)
    try:
        manifest = pack(args.src, args.dst, shard_size=args.shard_size,
                        max_side=args.max_side, quality=args.quality, part=args.part,
                        workers=args.workers, shuffle=args.shuffle, overwrite=args.overwrite,
                        modality=args.modality,
                        run=PackRun(args.engine, args.ray_address, args.storage_options))
    except PackArgumentError as exc:
        parser.error(str(exc))
    except PackRefused as exc:
        print(f"{parser.prog}: refused: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:  # SRC changed under the packer: a file vanished
        print(f"{parser.prog}: failed: {type(exc).__name__}: {exc}; the shards written so "
              f"far are kept: run the same command again to resume", file=sys.stderr)
        return 1
    print(f"{args.dst}: {len(manifest['shards'])} of {manifest['shards_total']} shards, "
          f"{manifest['samples']} samples in {len(manifest['classes'])} classes")
    return 0

