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
"""
from __future__ import annotations

import io
import json
import os
import sys
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from dali_pipes.pack._args import (
    DEFAULT_SHARD_SIZE,
    PackArgumentError,
    check_option,
    check_part,
    check_paths,
    parse_args,
)
from dali_pipes.pack._args import parser as cli_parser
from dali_pipes.pack._members import MODALITIES, MemberPacker, member_packer
from dali_pipes.pack._owned import clean, marked, refuse_foreign
from dali_pipes.pack._resume import PackRefused, claim_plan, locked, make_plan, shard_state
from dali_pipes.sources.image import ImageFolderSource
from dali_pipes.stores.shard_writer import (
    part_shards,
    plan_shards,
    shard_name,
    temp_name,
    write_sample_shard,
    write_shard,
)


def pack(src, dst, *, shard_size: int = DEFAULT_SHARD_SIZE, max_side: int | None = None,
         quality: int = 90, part: tuple[int, int] = (0, 1), workers: int = 1,
         shuffle: int | None = None, progress: bool | None = None,
         overwrite: bool = False, modality: str = "image") -> dict:
    """Write the class folders of `src` as shards into `dst` (see the module doc).

    Args:
        src: a local folder of class folders of images.
        dst: the output folder (created).
        shard_size: the most image bytes (as read from SRC) per shard.
        max_side: re-encode images whose longer side exceeds this as JPEGs this large.
        quality: the JPEG quality of re-encoded images.
        part: (i, N): write every N-th shard starting at i.
        workers: processes encoding shards.
        shuffle: a seed: write the samples in that permutation of SRC's order (None: in order).
        progress: rich progress bar (True), plain lines (False), or by terminal (None).
        overwrite: delete what the pack tool wrote in `dst` before and start over (else a
            `dst` written by another plan is refused: `PackRefused`).
        modality: what `src` holds: "image" (class folders of images), "video", "fusion",
            "frames" or "detection" (see `dali_pipes.pack._members`).

    Returns:
        The manifest written. `PackArgumentError` (a ValueError) names a bad argument,
        `PackRefused` a destination this run must not write (another plan, another packer).
    """
    options = {"shard_size": shard_size, "max_side": max_side, "quality": quality,
               "shuffle": shuffle}
    for name, value in (*options.items(), ("workers", workers)):
        if value is not None or name in ("shard_size", "quality", "workers"):
            check_option(name, value)
    part = check_part(part)
    out = check_paths(src, dst)
    source = _source(src, modality, max_side)
    order = np.arange(len(source)) if shuffle is None else sample_order(len(source), shuffle)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out, part, overwrite):
        refuse_foreign(out)
        gone = clean(out, everything=overwrite)
        if gone:
            print(f"{out}: deleted {len(gone)} files of the pack tool ("
                  + ("--overwrite" if overwrite else "temporary files of dead packers") + ")",
                  file=sys.stderr)
        plan = make_plan(source.listing_digest(), shard_size=shard_size, max_side=max_side,
                         quality=quality, shuffle=shuffle)
        if modality != "image":
            plan["modality"] = modality
        digest = claim_plan(out, plan)
        for name, data in getattr(source, "extra_files", {}).items():
            _write_bytes(out / name, data)
        return _write(source, out, order, options, (plan, digest), part, workers, progress)


def _write(source, out: Path, order: np.ndarray, options: dict, plan: tuple[dict, str],
           part: tuple[int, int], workers: int, progress: bool | None) -> dict:
    if isinstance(source, MemberPacker):
        sizes = source.sizes[order]
    else:
        sizes = np.asarray([os.path.getsize(source.files[i]) for i in order.tolist()], np.int64)
    shards = plan_shards(sizes, options["shard_size"])
    mine = part_shards(len(shards), *part)
    pending = _pending(out, mine, plan[1])
    jobs: list
    if isinstance(source, MemberPacker):
        jobs = [(str(out / shard_name(j)), [(f"{i:09d}", source.members(i))
                                            for i in order[shards.samples(j)].tolist()],
                 plan[1]) for j in pending]
        work = _pack_members
    else:
        jobs = [(str(out / shard_name(j)), [(f"{i:09d}", source.files[i], int(source.labels[i]))
                                            for i in order[shards.samples(j)].tolist()],
                 options["max_side"], options["quality"], plan[1]) for j in pending]
        work = _pack_shard
    _run(jobs, workers, _reporter(len(mine), len(mine) - len(pending), progress), work)
    manifest = _manifest(source, out, mine, len(shards), options)
    manifest["plan"] = {**plan[0], "digest": plan[1]}
    name = "manifest.json" if part[1] == 1 else f"manifest-part-{part[0]}-of-{part[1]}.json"
    _write_json(out / name, manifest)
    return manifest


def _pending(out: Path, mine: list[int], digest: str) -> list[int]:
    """The shards of `mine` to write: missing or damaged ones (said on stderr)."""
    pending = []
    for j in mine:
        state = shard_state(out, shard_name(j), digest)
        if state.startswith("damaged"):
            print(f"{out / shard_name(j)}: {state}; writing it again", file=sys.stderr)
        if state != "done":
            pending.append(j)
    return pending


def _source(src, modality: str, max_side: int | None) -> ImageFolderSource | MemberPacker:
    if modality not in MODALITIES:
        raise PackArgumentError(f"modality must be one of {', '.join(MODALITIES)}, got "
                                f"{modality!r}")
    if modality != "image" and max_side is not None:
        raise PackArgumentError(f"--max-side re-encodes images; it does not apply to "
                                f"--modality {modality} (members are copied as they are)")
    try:
        return ImageFolderSource(src) if modality == "image" else member_packer(src, modality)
    except (OSError, ValueError) as exc:
        raise PackArgumentError(f"SRC {src}: {exc}") from exc


def sample_order(n: int, seed: int) -> np.ndarray:
    """The order `--shuffle seed` writes n samples in: a permutation, a pure function of both."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"shuffle must be a seed (an int >= 0) or None, got {seed!r}")
    return np.random.default_rng([int(seed), 0x5041434B]).permutation(n)


def _run(jobs: list, workers: int, report, work=None) -> None:
    work = work or _pack_shard
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            report(work(job))
        return
    with get_context("spawn").Pool(min(workers, len(jobs))) as pool:
        for done in pool.imap_unordered(work, jobs):
            report(done)


def _pack_members(job) -> str:
    path, samples, digest = job
    record = write_sample_shard(path, samples)
    _write_json(Path(f"{path}.json"), {**record, "plan": digest})
    return os.path.basename(path)


def _pack_shard(job) -> str:
    path, samples, max_side, quality, digest = job
    members = [(key, *_encode(file, max_side, quality), label) for key, file, label in samples]
    record = write_shard(path, members)
    _write_json(Path(f"{path}.json"), {**record, "plan": digest})
    return os.path.basename(path)


def _encode(file: str, max_side: int | None, quality: int) -> tuple[str, bytes]:
    """(extension, bytes): the file as it is, or re-encoded smaller when `max_side` asks."""
    data = Path(file).read_bytes()
    ext = Path(file).suffix.lower().lstrip(".")
    if max_side is None:
        return ext, data
    from PIL import Image
    try:
        with Image.open(io.BytesIO(data)) as image:
            if max(image.size) <= max_side:
                return ext, data
            scale = max_side / max(image.size)
            size = tuple(max(1, round(s * scale)) for s in image.size)
            small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{file}: cannot be decoded to resize it ({exc})") from exc
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=quality)
    return "jpg", buffer.getvalue()


def _manifest(source, out: Path, mine: list[int], n_shards: int, options: dict) -> dict:
    counts = np.asarray(getattr(source, "class_counts", None) if isinstance(
        source, MemberPacker) else np.bincount(source.labels, minlength=len(source.classes)))
    shards = [{"name": shard_name(j), **json.loads((out / f"{shard_name(j)}.json").read_text())}
              for j in mine]
    return {"format": "webdataset", "classes": list(source.classes),
            "class_counts": counts.tolist(), "samples": len(source), "shards_total": n_shards,
            "shards": shards, "options": options}


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = Path(temp_name(path))
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _write_json(path: Path, value: dict) -> None:
    tmp = Path(temp_name(path))
    tmp.write_text(json.dumps(marked(value), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _reporter(total: int, done: int, progress: bool | None):
    """A callback taking each finished shard's name: a rich bar or plain lines."""
    use_rich = (sys.stderr.isatty() if progress is None else progress) and done < total
    state = {"done": done}
    if use_rich:
        from rich.progress import Progress
        bar = Progress(transient=False)
        task = bar.add_task("packing shards", total=total, completed=done)
        bar.start()

    def report(name: str) -> None:
        state["done"] += 1
        if use_rich:
            bar.update(task, advance=1)
            if state["done"] == total:
                bar.stop()
        else:
            print(f"packed {name} ({state['done']}/{total} shards)", file=sys.stderr)
    return report


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
                        modality=args.modality)
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

