"""Remote reads against local ones: every modality from S3 and HTTP, local vs warm vs cold.

    python bench/studies/remote_speed.py [--modalities hyperspectral,image,video]
        [--stores s3,http] [--backends dali,torch] [--rounds 3] [--epochs 3]
        [--hyperspectral DIR] [--images DIR] [--video DIR] [--work DIR] [--json PATH]

Data (pass your own): `--hyperspectral`, a folder of one ENVI scene with its
label map (default: a 320 x 300 x 64-band int16 BIL scene); `--images`, class folders of
images, packed into shards with `python -m dali_pipes.pack` (default: the built-in 640
photos); `--video`, class folders of H.264 clips (default: 48 clips of 4 s, 320x240,
libx264). S3 is moto's server, HTTP the test range server, both on 127.0.0.1 in this
process; S3 reads the folders (scenes, shards, video class folders), HTTP the scene URLs
and shards (the video packed into shards too), each against the same files on local disk.

Each (modality, store, backend) runs in a process of its own (bench/studies/remote_row.py),
the local and the remote loader side by side: the local loader's first epoch, the remote
one's first epoch over an empty `cache_dir` (`cold`; the two first epochs in turns from
round to round), then `--epochs` epochs of each in turn (`local`, `warm`), so every warm
epoch has a local one seconds away; rounds repeat it, in rotated order. `raw` is the
server's ceiling: every byte of the same objects read once by N threads of GETs of 4 MiB
(the cache's blocks) and 8 MiB (the read-ahead's merged requests) through the same client.
Reported: samples/s (medians, min-max), the ratios of each warm epoch to its local
neighbour, cold against the local loader (its first epoch, and its later ones) and against
the bound a cold epoch can reach (the lower of the local first epoch's rate and the best
raw GET rate over the bytes each sample fetched), CPU ms per sample, and the machine's
load. Prints the tables; --json writes everything.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parents[1]))

from bench.launch import run_round  # noqa: E402
from bench.metrics import LoadMonitor  # noqa: E402
from bench.report import write_json  # noqa: E402

CLIPS = {"batch_size": 8, "clip_length": 16, "size": 112}  # video: 16 frames to 112x112
S3_ROOT = "s3://bench/served"  # where the served folder is put in S3
RAW = ((1, 4 << 20), (4, 4 << 20), (4, 8 << 20))  # (threads, bytes a request)


def loader_options(modality: str) -> dict:
    """make_loader options of a modality's rows (both loaders, both backends)."""
    return {**(CLIPS if modality == "video" else {"batch_size": 64}), "seed": 0}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modalities", default="hyperspectral,image,video")
    p.add_argument("--stores", default="s3,http")
    p.add_argument("--backends", default="dali,torch")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="warm epochs (and local ones)")
    p.add_argument("--hyperspectral", type=Path, help="a folder of ENVI scenes")
    p.add_argument("--images", type=Path, help="class folders of images")
    p.add_argument("--video", type=Path, help="class folders of H.264 clips")
    p.add_argument("--work", type=Path, default=Path("/tmp/dali_pipes_remote_speed"))
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def _pack(src: Path, dst: Path, *extra: str) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "dali_pipes.pack", str(src), str(dst), *extra],
                   check=True, capture_output=True)
    return dst


def _scene(work: Path) -> Path:
    from dali_pipes.sample_data.sample_hyperspectral import hyperspectral_dataset
    out = work / "hyperspectral"
    out.mkdir(parents=True, exist_ok=True)
    for path in hyperspectral_dataset(lines=300, samples=320, bands=64).glob("scene_00_envi*"):
        shutil.copy(path, out / path.name)
    return out


def _clips(work: Path, count: int = 48) -> Path:
    from bench.studies.bench_video_stores import write_long_video
    out = work / "video"
    for i in range(count):
        path = out / f"class_{i % 4}" / f"clip_{i:02d}.mp4"
        if not path.exists():
            write_long_video(path, 4, (320, 240))
    return out


def prepare(args) -> dict[str, dict[str, Path]]:
    """Per modality the local data each store's rows are compared with (the files served)."""
    served = args.work / "served"
    served.mkdir(parents=True, exist_ok=True)
    data: dict[str, dict[str, Path]] = {}
    stores = args.stores
    if "hyperspectral" in args.modalities:
        folder = Path(shutil.copytree(args.hyperspectral or _scene(args.work),
                                      served / "scenes", dirs_exist_ok=True))
        data["hyperspectral"] = {s: folder for s in stores}
    if "image" in args.modalities:
        from dali_pipes.sample_data.sample_images import image_dataset
        shards = _pack(args.images or image_dataset(n_images=640), served / "image-shards")
        data["image"] = {s: shards for s in stores}
    if "video" in args.modalities:
        folder = Path(shutil.copytree(args.video or _clips(args.work), served / "video",
                                      dirs_exist_ok=True))
        shards = _pack(folder, served / "video-shards", "--modality", "video")
        data["video"] = {s: folder if s == "s3" else shards for s in stores}
    return data


def remote(store: str, modality: str, local: Path, served: Path, servers: dict):
    """(data, storage options, [(url, size)] of its objects) of `local` behind `store`."""
    rel = local.relative_to(served).as_posix()
    files = sorted(p for p in local.rglob("*") if p.is_file())
    if store == "s3":
        objects = [[f"{S3_ROOT}/{p.relative_to(served).as_posix()}", p.stat().st_size]
                   for p in files]
        return f"{S3_ROOT}/{rel}/", servers["s3"].options, objects
    base = servers["http"].url
    objects = [[f"{base}/{p.relative_to(served).as_posix()}", p.stat().st_size] for p in files]
    suffix = ".hdr" if modality == "hyperspectral" else ".tar"
    return [u for u, _ in objects if u.endswith(suffix)], {}, objects


def _row(spec: dict) -> dict:
    result, code, err = run_round(["--spec", json.dumps(spec)], lambda done: None,
                                  entry="bench.studies.remote_row")
    if code != 0 or result is None:
        raise RuntimeError(f"row {spec.get('row')} failed ({code}): {err[-2000:]}")
    result.pop("event")
    return result


def rows_of_round(rnd: int, data: dict, args) -> list[tuple]:
    """(modality, store, backend) runs of round `rnd`, the order rotated by the round,
    then the raw ceilings (backend None: (threads, bytes a request))."""
    def rotate(items: list, k: int) -> list:
        return items[k % len(items):] + items[:k % len(items)]
    runs: list[tuple] = [(m, s, b) for m in rotate(list(data), rnd)
                         for b in rotate(list(args.backends), rnd)
                         for s in rotate(list(args.stores), rnd)]
    return runs + [(m, s, raw) for m in data for s in args.stores for raw in RAW]


def run(args, data: dict, servers: dict) -> list[dict]:
    out = []
    for rnd in range(args.rounds):
        for modality, store, backend in rows_of_round(rnd, data, args):
            print(f"round {rnd + 1}/{args.rounds}: {modality} {store} {backend}",
                  file=sys.stderr, flush=True)
            spec = _spec(modality, store, backend, rnd, data, servers, args)
            raw = f"{backend[0]}x{backend[1] >> 20}" if spec.get("raw") else None
            out.append({"round": rnd, "modality": modality, "store": store,
                        "backend": None if raw else backend, "raw": raw, **_row(spec)})
    return out


def _spec(modality, store, backend, rnd, data, servers, args) -> dict:
    url, options, objects = remote(store, modality, data[modality][store],
                                   args.work / "served", servers)
    if not isinstance(backend, str):  # a raw ceiling
        threads, size = backend
        return {"raw": True, "objects": objects, "options": options, "threads": threads,
                "request": size}
    cache = args.work / "caches" / f"{modality}-{store}-{backend}-{rnd}"
    shutil.rmtree(cache, ignore_errors=True)
    return {"modality": modality, "backend": backend, "local": str(data[modality][store]),
            "remote": url, "epochs": args.epochs, "cold_first": rnd % 2 == 1,
            "options": loader_options(modality),
            "remote_options": {"storage_options": options, "cache_dir": str(cache)}}


def main(argv=None) -> int:
    from bench.studies.remote_tables import print_tables, summary
    from tests.stores.servers import MotoS3, RangeServer
    args = parse_args(argv)
    args.modalities, args.stores = args.modalities.split(","), args.stores.split(",")
    args.backends = args.backends.split(",")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    data = prepare(args)
    served = args.work / "served"
    with MotoS3() as s3, RangeServer(served) as http:
        s3.put_tree(served, "bench", "served")
        with LoadMonitor() as load:
            runs = run(args, data, {"s3": s3, "http": http})
    report = {"settings": {k: str(v) if isinstance(v, Path) else v
                           for k, v in vars(args).items()},
              "runs": runs, "load": load.summary()}
    report["summary"] = summary(runs)
    print_tables(report)
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
