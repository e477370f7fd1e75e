"""bench/gpu_wheels.py: the pruned site folder does not hide the image's `nvidia` namespace,
and parts received one call at a time are checked by sha256, the missing ones named."""
from __future__ import annotations

import io
import lzma
import os
import subprocess
import sys
import tarfile

from bench.gpu_wheels import ARCHIVE, EXIT_BAD, EXIT_MISSING, prune, receive, split


def _pkg(root, *parts):
    d = root.joinpath(*parts)
    d.mkdir(parents=True)
    (d / "__init__.py").write_text("")


def test_pruned_site_keeps_the_nvidia_namespace_shared(tmp_path):
    image, site = tmp_path / "image", tmp_path / "site"
    _pkg(image, "nvidia", "cublas")           # the image's namespace package
    _pkg(site, "nvidia", "dali")
    (site / "nvidia" / "__init__.py").write_text("")  # as the nvimgcodec wheel ships it
    (site / "nvidia" / "dali" / "backend_impl.cpython-311-x86_64-linux-gnu.so").write_text("")
    keep = site / "nvidia" / "dali" / "backend_impl.cpython-312-x86_64-linux-gnu.so"
    keep.write_text("")
    code = "import nvidia.dali, nvidia.cublas"
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{image}")
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode != 0
    gone = prune(site)
    assert "nvidia/__init__.py" in gone and keep.exists() and len(gone) == 2
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_parts_are_checked_and_the_missing_ones_named(tmp_path):
    buf = io.BytesIO()
    with lzma.open(buf, "wb", preset=0) as xz, tarfile.open(fileobj=xz, mode="w|") as tar:
        data = os.urandom(10_000)
        info = tarfile.TarInfo("pkg/data.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / ARCHIVE
    archive.write_bytes(buf.getvalue())
    whl = tmp_path / "whl"
    manifest = split(archive, whl, 4096)
    assert len(manifest["parts"]) == 3
    store, site = tmp_path / "store", tmp_path / "site"
    calls = [tmp_path / f"call{k}" for k in range(3)]  # what each call carries
    for k, call in enumerate(calls):
        (call / f"p{k}").mkdir(parents=True)
        for f in (whl / f"p{k}").iterdir():
            (call / f"p{k}" / f.name).write_bytes(f.read_bytes())
    status, message = receive(calls[0], store, site)
    assert status == EXIT_MISSING and "missing: p1" in message and "p2" in message
    bad = calls[1] / "p1" / f"{ARCHIVE}.01"
    good = bad.read_bytes()
    bad.write_bytes(b"x" + good[1:])
    status, message = receive(calls[1], store, site)
    assert status == EXIT_BAD and str(bad) in message
    bad.write_bytes(good)
    assert receive(calls[1], store, site)[0] == EXIT_MISSING
    status, message = receive(calls[2], store, site)
    assert status == 0, message
    assert (site / "pkg" / "data.bin").read_bytes() == data
    assert receive(tmp_path / "nothing", store, site)[0] == 0  # a rerun: already unpacked
