"""DALI (and what else the device image lacks) for a GPU machine that cannot reach a package
index, in as few calls as its 64 MiB carry limit allows (docs/gpu.md).

    python bench/gpu_wheels.py prepare     here: download the wheels for Python 3.12, unpack
                                           them into one site folder, prune it, pack it as
                                           one tar.xz and split that into parts that fit a
                                           call beside the working tree: .whl/p0, .whl/p1,
                                           ... (one folder per call, each with MANIFEST)
    python bench/gpu_wheels.py receive     there, in every call, with that call's part
                                           folder carried: checks each carried part's
                                           sha256, keeps it in STORE (/opt/dp-wheels: it
                                           lives while the machine stays warm), says which
                                           parts are still missing (exit 4); with every
                                           part in, checks the whole archive and unpacks it
                                           into SITE (/opt/dp-site; exit 0)

Then `export PYTHONPATH=/opt/dp-site:$PWD`. Pruning drops the extension modules built for
other Pythons and the `nvidia/__init__.py` the nvimgcodec / nvjpeg2k / nvtiff wheels ship:
with it, /opt/dp-site/nvidia would be a regular package that hides the image's own
`nvidia` namespace (nvidia.cublas, nvidia.cu13 ... of torch and CuPy).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

WANT = ("nvidia-dali-cuda130==2.4.0", "nvidia-nvimgcodec-cu13==0.9.0.20",
        "nvidia-libnvcomp-cu13==5.3.0.16", "nvidia-nvjpeg==13.3.2.43",
        "nvidia-nvjpeg2k-cu13==0.11.0.51", "nvidia-nvtiff-cu13==0.8.0.82",
        "astunparse==1.6.3", "gast==0.7.0", "optree==0.20.0", "makefun==1.16.0",
        "libcst==1.9.0", "nvtx==0.2.17", "av==19.0.2", "spectral==0.24",
        "pycocotools==2.0.11", "simplejpeg==1.9.0")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
PY = "312"
CARRY_LIMIT = 64 * 2**20
STORE, SITE = Path("/opt/dp-wheels"), Path("/opt/dp-site")
ARCHIVE = "site.tar.xz"
EXIT_MISSING, EXIT_BAD = 4, 1


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def prune(site: Path) -> list[str]:
    """Remove what the device does not need or what would break it; returns what went."""
    gone = []
    ns = site / "nvidia" / "__init__.py"
    if ns.exists():
        ns.unlink()
        gone.append(str(ns.relative_to(site)))
    for ext in site.rglob("*.cpython-3*.so"):
        if f".cpython-{PY}-" not in ext.name:
            ext.unlink()
            gone.append(str(ext.relative_to(site)))
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache)
    return gone


def tree_bytes(repo: Path) -> int:
    """Bytes of what travels with every call: tracked and untracked-not-ignored files."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo,
                           capture_output=True, check=True).stdout.split(b"\0")
    return sum((repo / n.decode()).stat().st_size for n in names
               if n and (repo / n.decode()).is_file())


def split(archive: Path, dest: Path, part_bytes: int) -> dict:
    """`archive` cut into dest/p0/ARCHIVE.00, dest/p1/ARCHIVE.01, ... with one MANIFEST
    (every part's size and sha256, the whole archive's) in each part folder."""
    for old in dest.glob("p[0-9]*"):
        shutil.rmtree(old)
    parts = []
    with archive.open("rb") as f:
        while chunk := f.read(part_bytes):
            k = len(parts)
            folder = dest / f"p{k}"
            folder.mkdir(parents=True)
            name = f"{ARCHIVE}.{k:02d}"
            (folder / name).write_bytes(chunk)
            parts.append({"name": name, "folder": folder.name, "bytes": len(chunk),
                          "sha256": hashlib.sha256(chunk).hexdigest()})
    manifest = {"archive": ARCHIVE, "sha256": sha256(archive), "parts": parts}
    for p in parts:
        (dest / p["folder"] / "MANIFEST").write_text(json.dumps(manifest, indent=1))
    return manifest


def receive(carried: Path, store: Path = STORE, site: Path = SITE) -> tuple[int, str]:
    """Check and keep the parts carried in this call; unpack once all are in.
    Returns (exit status, message): 0 unpacked (or already), EXIT_MISSING, EXIT_BAD."""
    if (site / ".complete").exists():
        return 0, f"already unpacked in {site}"
    manifests = sorted(carried.glob("p[0-9]*/MANIFEST"))
    if not manifests and not (store / "MANIFEST").exists():
        return EXIT_MISSING, f"no part folder under {carried} and none received before"
    store.mkdir(parents=True, exist_ok=True)
    for m in manifests:
        manifest = json.loads(m.read_text())
        for part in manifest["parts"]:
            got = m.parent / part["name"]
            if not got.exists():
                continue
            if got.stat().st_size != part["bytes"] or sha256(got) != part["sha256"]:
                return EXIT_BAD, f"{got}: sha256 differs from the MANIFEST: carry it again"
            shutil.copyfile(got, store / part["name"])
        shutil.copyfile(m, store / "MANIFEST")
    manifest = json.loads((store / "MANIFEST").read_text())
    have = [p["name"] for p in manifest["parts"] if (store / p["name"]).exists()]
    missing = [f'{p["folder"]} ({p["name"]})' for p in manifest["parts"]
               if p["name"] not in have]
    if missing:
        return EXIT_MISSING, f"have {len(have)} of {len(manifest['parts'])} parts; " \
                             f"missing: {', '.join(missing)}"
    return unpack(store, site, manifest)


def unpack(store: Path, site: Path, manifest: dict) -> tuple[int, str]:
    whole = store / manifest["archive"]
    with whole.open("wb") as out:
        for p in manifest["parts"]:
            with (store / p["name"]).open("rb") as f:
                shutil.copyfileobj(f, out)
    if sha256(whole) != manifest["sha256"]:
        return EXIT_BAD, f"{whole}: the joined parts' sha256 differs from the MANIFEST"
    site.mkdir(parents=True, exist_ok=True)
    with lzma.open(whole) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        tar.extractall(site, filter="data")
    whole.unlink()
    (site / ".complete").write_text(manifest["sha256"])
    return 0, f"unpacked {len(manifest['parts'])} parts into {site}"


def prepare(repo: Path, margin: int = 2 * 2**20, preset: int = 9) -> dict:
    """Download, unpack, prune, pack and split (see the module doc)."""
    whl = repo / ".whl"
    wheels, stage = whl / "wheels", whl / "stage"
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(pip + ["download", "--no-deps", "--only-binary=:all:", "--python-version",
                          "3.12", "--implementation", "cp", *plat, "-d", str(wheels), *WANT],
                   check=True)
    shutil.rmtree(stage, ignore_errors=True)
    subprocess.run(pip + ["install", "-q", "--no-deps", "--no-index", "--no-compile",
                          "--ignore-requires-python", "--only-binary=:all:", "--python-version",
                          "3.12", "--implementation", "cp", *plat, "--target",
                          str(stage / "site"), *map(str, sorted(wheels.glob("*.whl")))],
                   check=True)
    prune(stage / "site")
    archive = whl / ARCHIVE
    with lzma.open(archive, "wb", preset=preset) as xz, tarfile.open(fileobj=xz, mode="w|") as t:
        t.add(stage / "site", arcname=".")
    part = CARRY_LIMIT - tree_bytes(repo) - margin
    return split(archive, whl, part)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("prepare", "receive"))
    parser.add_argument("--whl", type=Path, default=Path(".whl"), help="the carried folder")
    parser.add_argument("--store", type=Path, default=STORE)
    parser.add_argument("--site", type=Path, default=SITE)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        manifest = prepare(Path.cwd())
        for p in manifest["parts"]:
            print(f'carry [".whl/{p["folder"]}"]: {p["bytes"] / 2**20:.1f} MiB')
        return 0
    status, message = receive(args.whl, args.store, args.site)
    print(f"gpu_wheels receive: {message}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
