"""`python -m torch_bridge.check DATA [DATA ...] [--modality M] [--decode] [--annotations F]`:
scan a data set before training with the validation the loaders use, and say what they would
skip and why.

DATA is anything `make_loader` takes for the modality: folders, WebDataset shards (a .tar,
a brace pattern, a folder of them such as the pack tool's output), URLs (with
`--storage-options` as make_loader's). Without `--modality` the modality is guessed from the
data (`detect_modality`). The modality is then made through the registry exactly as
`make_loader` makes it (the listing, shard indexes, scene headers, label maps, IMU channel
agreement and a detection set's COCO file are checked there; a failure there means
make_loader itself would fail), and each sample's own checks run: images and frame-folder
JPEGs are read and checked like the loaders' reads (header, `max_pixels`, the scan check of
`dali_pipes.formats.jpeg_scan`; for detection also the file's "height" / "width"), videos
probed, IMU files parsed, hyperspectral cubes opened and compared with their listing, and
any other modality's samples loaded as its torch path loads them. Listing entries that look
broken (dangling symlinks, symlink loops, unreadable class folders) count as problems too.
`--decode` also decodes every JPEG strictly (any decoder warning is an error): that finds
what the cheap scan check cannot see (docs/failure_modes.md). Progress goes to stderr (a
rich bar on a terminal, plain lines otherwise), problems and the summary to stdout; the
exit code is 1 when anything is bad.
"""
from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dali_pipes.cli import ArgumentParser, json_object
from dali_pipes.sources.detection import DEFAULT_ANNOTATIONS
from dali_pipes.sources.protocol import ClipRead
from dali_pipes.stores import Store
from torch_bridge import registry

MODALITIES = registry.names()
# Listing reasons that only say "not a sample"; any other reason is a problem.
BENIGN = frozenset({"hidden", "other extension", "not a file", "not a folder"})


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str


@dataclass
class Report:
    modality: str
    checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    ignored: int = 0  # listing entries that are not samples (other extensions, hidden)

    @property
    def ok(self) -> bool:
        return not self.problems


def detect_modality(data) -> str:
    """The modality `data` holds: for shards, what `_shard_kind.shard_modality` reads from
    them; for a folder, the modality whose registry entry claims it (its `holds` test:
    scene files, a COCO file, IMU streams, .npy files, clips or frame folders); the one
    without a test (images) when none does."""
    from dali_pipes.sources.shard_names import is_shard_data
    specs = registry.REGISTRY.values()
    fallback = next(spec.name for spec in specs if spec.holds is None)
    if is_shard_data(data):
        from torch_bridge.tools._shard_kind import shard_modality
        return shard_modality(data) or fallback
    return next((spec.name for spec in specs if spec.claims(data)), fallback)


def _strict_decode(data, path: str) -> None:
    """Decode a JPEG strictly (other formats were checked from their headers only)."""
    import simplejpeg

    from dali_pipes.formats.image_kind import image_kind
    if image_kind(data) != "jpeg":
        return
    try:
        simplejpeg.decode_jpeg(data.tobytes(), strict=True)
    except ValueError as exc:
        raise ValueError(f"{path}: decoder: {exc}") from exc


Units = list[tuple[str, Callable[[], object]]]


def _image_units(src, decode: bool) -> Units:
    """Images (class folders, shards, detection sets): the read and header checks of the
    loaders' reads (and a strict decode)."""
    def image(i: int) -> None:
        raw, _ = src.read(i)
        if decode:
            _strict_decode(raw, src.path(i))
    return [(src.path(i), functools.partial(image, i)) for i in range(len(src))]


def _frame_units(src, decode: bool) -> Units:
    """Frame folders (local, behind URLs, in shards): every frame read and checked."""
    def folder(i: int) -> None:
        frames = src.read(i, ClipRead(np.arange(src.frame_count(i)))).data
        for k, raw in enumerate(frames if decode else []):
            _strict_decode(raw, f"{src.path(i)}/frame {k}")
    return [(src.path(i), functools.partial(folder, i)) for i in range(len(src))]


def _video_units(src) -> Units:
    """Videos (and their IMU streams): probed and parsed as the loaders do."""
    def video(i: int) -> None:
        src.info(i)
        if hasattr(src, "stream"):
            src.stream(i)
    return [(src.path(i), functools.partial(video, i)) for i in range(len(src))]


def _units(modality: str, data, *, decode: bool, options: dict, store=None
           ) -> tuple[object, Units]:
    """(source, [(path, check)]): the modality made as make_loader makes it (through the
    registry: every `data` make_loader takes, with its validation), and one check per file
    its loaders read: the cheap checks of the source's own reads where it has them, else
    each sample loaded as the torch path loads it."""
    if modality not in MODALITIES:
        raise ValueError(f"modality must be one of {', '.join(MODALITIES)}, got {modality!r}")
    spec = registry.get(modality)
    known = spec.options()
    made = spec.create(data, seed=0, device="cpu", store=store,
                       options={k: v for k, v in options.items() if k in known})
    src = made.source
    kind = getattr(src, "data_kind", None)
    if kind == "image":
        return src, _image_units(src, decode)
    if kind == "frames":
        return src, _frame_units(src, decode)
    if kind == "patch" and hasattr(src, "scenes") and hasattr(src, "cube"):
        return src, [(s.path, functools.partial(src.cube, k)) for k, s in enumerate(src.scenes)]
    if kind == "video" and hasattr(src, "info"):
        return src, _video_units(src)
    return src, [(made.path(i), functools.partial(made.load, 0, i)) for i in range(len(made))]


def check_data(data, *, modality: str | None = None, decode: bool = False,
               max_pixels: int | None = None, progress: Callable[[int, int], None] | None = None,
               annotations: str = DEFAULT_ANNOTATIONS,
               storage_options: dict | None = None, store: Store | None = None) -> Report:
    """Check every sample of `data` as the loaders would.

    Args:
        data: anything make_loader takes for the modality: a folder or a list of folders,
            WebDataset shards (a .tar, a brace pattern, a folder of them, the pack tool's
            output), URLs.
        modality: one of MODALITIES, or None to detect it (`detect_modality`).
        decode: also decode each JPEG strictly (simplejpeg, warnings are errors).
        max_pixels: the image pixel limit (None: the loaders' default).
        progress: called as progress(done, total) after each file.
        annotations: the COCO file of a detection data set (as make_loader's option).
        storage_options: for data behind URLs, passed to fsspec (as make_loader's option).
        store: a store to list and read `data` through (as make_loader's `store=`).

    Returns:
        A Report. Errors of making the source itself (make_loader would fail) propagate.
    """
    if store is not None and modality is None:
        raise ValueError("check_data: give the modality with store= (the modality is "
                         "guessed from local files only)")
    modality = modality or detect_modality(data)
    options = {"annotations": annotations, "max_pixels": max_pixels,
               "storage_options": storage_options}
    source, units = _units(modality, data, decode=decode, store=store,
                           options={k: v for k, v in options.items() if v is not None})
    report = Report(modality)
    listing = getattr(source, "listing", None)
    ignored = getattr(listing, "ignored", ())
    for path, why in zip(ignored, getattr(listing, "ignored_reasons", ()), strict=False):
        if why in BENIGN:
            report.ignored += 1
        else:
            report.problems.append(Problem(path, f"listing: {why}"))
    for done, (path, check) in enumerate(units, 1):
        try:
            check()
        except Exception as exc:  # what SampleGuard skips: any per-sample failure
            report.problems.append(Problem(path, f"{type(exc).__name__}: {exc}"))
        report.checked = done
        if progress is not None:
            progress(done, len(units))
    return report


class _Progress:
    """A rich bar on a terminal, else a plain line every tenth of the way (stderr)."""

    def __init__(self):
        self._bar = self._task = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress
            self._bar = Progress(transient=True, console=Console(stderr=True))
            self._bar.start()

    def __call__(self, done: int, total: int) -> None:
        if self._bar is not None:
            if self._task is None:
                self._task = self._bar.add_task("checking", total=total)
            self._bar.update(self._task, completed=done)
        elif done == total or done % max(1, total // 10) == 0:
            print(f"checked {done}/{total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m torch_bridge.check",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+", help="what make_loader takes: folder(s), tar "
                        "shards (a .tar, a brace pattern, a folder of them), URLs")
    parser.add_argument("--modality", choices=MODALITIES, default=None)
    parser.add_argument("--decode", action="store_true", help="also decode JPEGs strictly")
    parser.add_argument("--max-pixels", type=int, default=None)
    parser.add_argument("--annotations", default=DEFAULT_ANNOTATIONS,
                        help="detection: the COCO instances file (default: %(default)s)")
    parser.add_argument("--storage-options", type=json_object, metavar="JSON",
                        help="data behind URLs: fsspec options, as make_loader's")
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # names that are not UTF-8 print escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    data = args.data[0] if len(args.data) == 1 else args.data
    progress = _Progress()
    try:
        report = check_data(data, modality=args.modality, decode=args.decode,
                            max_pixels=args.max_pixels, progress=progress,
                            annotations=args.annotations,
                            storage_options=args.storage_options)
    except (OSError, ValueError) as exc:
        progress.close()
        print(f"error: make_loader would fail: {type(exc).__name__}: {exc}")
        return 1
    progress.close()
    for problem in report.problems:
        print(f"SKIP {problem.path}: {problem.reason}")
    print(f"{report.modality}: checked {report.checked} files, {len(report.problems)} "
          f"bad, {report.ignored} other entries ignored (not samples)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
