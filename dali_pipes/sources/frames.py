"""Offline frame extraction: class folders of videos -> class folders of per-frame JPEG folders.

`python -m dali_pipes.frames extract SRC DST [--quality 90] [--every N]` writes, for every
video `SRC/<class>/<stem>.<ext>` (the extensions of `sources.video.VIDEO_EXTENSIONS`),
`DST/<class>/<stem>/frame_000000.jpg, ...` (decoded with PyAV in presentation order, the frame
numbering of `formats.video.probe_video`, encoded with PIL at `--quality`; with `--every N`
only frames 0, N, 2N, ... are kept) plus `timestamps.npy` (float64 seconds of each written
frame, from the probe) and a `.complete` marker written last. A folder with `.complete` is
skipped on a re-run; a folder without it (an interrupted run) is rebuilt. A video that fails
to probe or decode is reported (file and reason), its partial folder removed, and the others
are still extracted; the command then exits with code 1. Such a tree is loaded by
`make_loader("video", DST)` (`torch_bridge.modalities.video_frames`): clips are sampled with
the same (seed, epoch, index) rules as the video modality and the clip's JPEGs decoded by DALI.

When each path wins (speeds measured with `python bench/studies/bench_video_paths.py`, in the
README; one disk measurement below). Decoding
video per sample (`modality="video"` on the video files) keeps the data set at its compressed
size and costs, per clip, the decode from the keyframe before the clip to its last frame, so
random access costs up to one keyframe interval of extra frames, and every frame of that
interval is decoded even with a large stride; on a GPU NVDEC does this work. Frame folders cost
disk: JPEG frames lose inter-frame compression, so the tree grows with the number of frames
kept (`--every` cuts it); measured once: 4 built-in synthetic VP9 clips of 160x120, 64 frames
each (`small_video_folder(..., n_videos=4, frames=(64,), size=(160, 120))`, then this command
at quality 90, `du -sb`) take 146 KB as WebM and 1013 KB as 256 JPEGs, 6.9x; real footage with
less noise compresses better as video, so expect more. There is also one file per frame (inode
and open/read overhead, which matters on network file systems). In return random access is
exact and free: a clip reads only its T files, so cost is independent of the keyframe interval,
the stride and the video's length, and decoding T JPEGs (nvJPEG / the hardware JPEG decoder
with `mixed`, libjpeg-turbo on the CPU) is cheaper than decoding a keyframe interval of
inter-coded frames: on the CPU backend frame folders gave 1.4-2.4x the clips/s of VP9 files
(more with a longer keyframe interval or a larger stride) for 8-12x the disk. Frame
folders therefore win when clips are short relative to the keyframe interval, strides are
large, the codec is one DALI cannot decode on the chosen
device (H.264/HEVC/AV1 on the CPU backend), or the same data set is read for many epochs and
the disk space is available; per-sample video decoding wins when disk or I/O bandwidth is the
limit, clips are long and dense, or the data set is read once. JPEG re-encoding also changes
pixels slightly: on the 64x48 test clips at quality 90, clips from the frame folders differ
from the same clips decoded from the video by a mean of 1.2-1.7 levels of 255
(tests/torch_bridge/test_video_frames.py, both backends).
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dali_pipes.cli import ArgumentParser
from dali_pipes.progress import progress_bar

COMPLETE = ".complete"
TIMESTAMPS = "timestamps.npy"


def frame_name(k: int) -> str:
    return f"frame_{k:06d}.jpg"


@dataclass
class ExtractReport:
    extracted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)


def extract_video(src: str | os.PathLike, out_dir: str | os.PathLike, *, quality: int = 90,
                  every: int = 1) -> int:
    """Write the frames of `src` into `out_dir` (see module doc); returns frames written."""
    import av
    from PIL import Image

    from dali_pipes.formats.video import probe_video

    info = probe_video(src)
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wanted = np.arange(0, info.frame_count, every, dtype=np.int64)
    wanted_set, written = set(wanted.tolist()), set()
    with av.open(info.path) as container:
        stream = container.streams[info.stream_index]
        for count, frame in enumerate(container.decode(stream)):
            if info.indexed_by == "decode":
                i = count
            else:
                if frame.pts is None:
                    continue
                i = int(np.searchsorted(info.pts, frame.pts))
                if i >= info.frame_count or info.pts[i] != frame.pts:
                    continue
            if i in wanted_set and i not in written:
                Image.fromarray(frame.to_ndarray(format="rgb24")).save(
                    out / frame_name(i // every), quality=quality)
                written.add(i)
    missing = sorted(wanted_set - written)
    if missing:
        raise ValueError(f"the decoder produced no frame for indices {missing[:8]} "
                         f"of {info.frame_count}")
    np.save(out / TIMESTAMPS, np.asarray(info.timestamps[wanted], dtype=np.float64))
    (out / COMPLETE).write_text("ok\n")
    return len(wanted)


def _videos(src: Path) -> list[tuple[str, Path]]:
    from dali_pipes.sources.video import VIDEO_EXTENSIONS

    found = []
    for cls in sorted(e for e in src.iterdir() if e.is_dir() and not e.name.startswith(".")):
        for f in sorted(cls.iterdir()):
            if f.is_file() and not f.name.startswith(".") \
                    and f.suffix.lower() in VIDEO_EXTENSIONS:
                found.append((cls.name, f))
    return found


def extract_tree(src: str | os.PathLike, dst: str | os.PathLike, *, quality: int = 90,
                 every: int = 1, progress: bool = True) -> ExtractReport:
    """Extract every video of `src/<class>/` into `dst/<class>/<stem>/` (see module doc)."""
    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be in [1, 100], got {quality}")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: not a folder of class folders")
    videos, report = _videos(src), ExtractReport()
    with progress_bar(len(videos), "extracting frames", unit="videos",
                      enabled=progress) as bar:
        for cls, path in videos:
            _extract_one(cls, path, dst, report, bar, quality=quality, every=every)
            bar.advance()
    return report


def _extract_one(cls: str, path: Path, dst: Path, report: ExtractReport, bar, *,
                 quality: int, every: int) -> None:
    """Extract one video into dst/<class>/<stem>/ unless complete; record the outcome."""
    out = dst / cls / path.stem
    if (out / COMPLETE).exists():
        report.skipped.append(str(path))
        return
    try:
        extract_video(path, out, quality=quality, every=every)
        report.extracted.append(str(path))
    except Exception as exc:  # reported per file; the others go on
        shutil.rmtree(out, ignore_errors=True)
        report.failed.append((str(path), f"{type(exc).__name__}: {exc}"))
        bar.print(f"failed {path}: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m dali_pipes.frames",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ext = sub.add_parser("extract", help="videos -> per-frame JPEG folders with timestamps")
    ext.add_argument("src")
    ext.add_argument("dst")
    ext.add_argument("--quality", type=int, default=90)
    ext.add_argument("--every", type=int, default=1)
    ext.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = extract_tree(args.src, args.dst, quality=args.quality, every=args.every,
                              progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path, reason in report.failed:
        print(f"FAILED {path}: {reason}", file=sys.stderr)
    print(f"extracted {len(report.extracted)}, skipped {len(report.skipped)} (already "
          f"complete), failed {len(report.failed)}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
