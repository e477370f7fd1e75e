"""dali_pipes.native: the C++ operators build once into the cache and load; without a
compiler or with DALI_PIPES_NATIVE=0 the graphs fall back to DALI's own operators and say
why; the fused policy operator validates its inputs, naming the sample."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import nvidia.dali.fn as fn
import pytest
from nvidia.dali import Pipeline

from dali_pipes import native
from dali_pipes.recipes import image_recipe
from dali_pipes.recipes.policies import OP, affine_matrices, photo_params
from dali_pipes.recipes.policies_graph import apply_policy

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("from dali_pipes import native; p = native.library('policy_op'); "
         "print(repr(p)); print(repr(native.why_not('policy_op')))")


def _probe(env_changes: dict[str, str | None]) -> tuple[str | None, str | None, str]:
    env = {**os.environ}
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr
    path, why = (eval(line) for line in run.stdout.strip().splitlines()[-2:])
    return path, why, run.stderr


@pytest.fixture(scope="module")
def first_build(tmp_path_factory):
    """A fresh cache folder after one process built the library into it: (folder, path,
    stderr of that process)."""
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    folder = tmp_path_factory.mktemp("native_cache")
    path, why, err = _probe({"DALI_PIPES_CACHE": str(folder)})
    assert why is None and path and Path(path).is_file(), err
    return folder, path, err


def test_builds_once_into_the_cache_then_loads(first_build):
    folder, path, err = first_build
    assert Path(path).is_relative_to(folder) and "building native operator" in err
    again, _, err2 = _probe({"DALI_PIPES_CACHE": str(folder)})
    assert again == path and "building" not in err2  # the cached file, no second build
    # no temporary file left; the library and its sidecar (size, sha256, sources' digest)
    assert sorted(p.name for p in Path(path).parent.iterdir()) == [
        "libpolicy_op.so", "libpolicy_op.so.sha256"]
    size, digest, sources = Path(path + ".sha256").read_text().split()
    assert int(size) == Path(path).stat().st_size
    assert digest == hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert sources[:16] == Path(path).parent.name
    # folders only this user can enter, a library nobody else can write
    modes = [Path(p).stat().st_mode & 0o777 for p in (Path(path).parent, path)]
    assert modes == [0o700, 0o755]


def test_a_truncated_cached_file_is_built_anew_not_loaded(first_build, tmp_path):
    """Half a library (a full disk, a half-synced home) kills the process with SIGBUS when
    DALI maps it: the size and sha256 recorded at build time catch it before loading."""
    folder, path, _ = first_build
    copy = tmp_path / "cache"
    shutil.copytree(folder, copy)
    damaged = copy / Path(path).relative_to(folder)
    whole = damaged.read_bytes()
    damaged.write_bytes(whole[: len(whole) // 2])
    again, why, err = _probe({"DALI_PIPES_CACHE": str(copy)})
    assert again == str(damaged) and why is None
    assert "does not match the size and sha256 recorded beside it" in err
    assert "building native operator" in err
    assert damaged.stat().st_size > len(whole) // 2 and damaged.read_bytes()[:4] == b"\x7fELF"
    sources = Path(f"{damaged}.sha256").read_text().split()[2]
    assert native.builder.verified(damaged, sources)


def test_the_shared_header_is_part_of_the_cache_key(tmp_path, monkeypatch):
    """Editing dp_op.h (included by every operator) builds every operator anew."""
    from dali_pipes.native import builder
    copy = tmp_path / "native"
    shutil.copytree(builder.SOURCES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(builder, "SOURCES", copy)
    src, options = copy / "policy_op.cc", ["g++", "-O3"]
    before = builder._key(src, options)
    assert builder._key(src, options) == before
    with open(copy / "dp_op.h", "a") as f:
        f.write("// edited\n")
    assert builder._key(src, options) != before


def test_package_data_ships_every_native_source():
    """pyproject's package-data globs cover every .cc and .h the build compiles."""
    import tomllib
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["package-data"]["dali_pipes.native"]
    sources = [p for p in native.SOURCES.iterdir() if p.suffix in (".cc", ".h")]
    assert any(p.suffix == ".h" for p in sources)
    for p in sources:
        assert any(p.match(g) for g in globs), p.name


_HANGING_CXX = """#!/bin/sh
sleep 600 &
echo $! > "$0.child"
echo $$ > "$0.pid"
wait
"""


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_compiler_that_never_returns_is_stopped_with_its_children(tmp_path):
    """DALI_PIPES_BUILD_TIMEOUT bounds the build: the compiler's whole process group is
    killed (a child it spawned too), stderr says so, and DALI's own operators take over."""
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    fake = tmp_path / "hanging-cxx"
    fake.write_text(_HANGING_CXX)
    fake.chmod(0o755)
    try:
        path, why, err = _probe({"DALI_PIPES_CXX": str(fake), "DALI_PIPES_BUILD_TIMEOUT": "3",
                                 "DALI_PIPES_CACHE": str(tmp_path / "cache")})
        pids = [int((tmp_path / f"hanging-cxx.{ext}").read_text()) for ext in ("pid", "child")]
        assert path is None and "took over 3 s (DALI_PIPES_BUILD_TIMEOUT)" in why
        assert "building native operator policy_op (first use" in err
        assert "the compiler was stopped" in err and "using DALI's own operators" in err
        assert [_alive(p) for p in pids] == [False, False]
        assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # no temp
    finally:
        for ext in ("pid", "child"):
            f = tmp_path / f"hanging-cxx.{ext}"
            if f.is_file() and _alive(int(f.read_text())):
                os.kill(int(f.read_text()), 9)


_RECORDING_HANGING_CXX = """#!/bin/sh
echo "$@" >> "$0.calls"
exec sleep 600
"""


def test_after_one_timeout_no_other_operator_is_built(tmp_path):
    """A compiler that never returns costs one timeout per process, not one per operator:
    after the first, no other build (nor the libjpeg check) runs, and stderr says so once."""
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    fake = tmp_path / "hanging-cxx"
    fake.write_text(_RECORDING_HANGING_CXX)
    fake.chmod(0o755)
    code = ("from dali_pipes import native\nfor n in native.OPERATORS:\n"
            "    print(repr((native.library(n), native.why_not(n))))")
    env = {**os.environ, "DALI_PIPES_CXX": str(fake), "DALI_PIPES_BUILD_TIMEOUT": "1",
           "DALI_PIPES_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr
    assert len((tmp_path / "hanging-cxx.calls").read_text().splitlines()) == 1
    assert run.stderr.count("took over") == 2  # the timeout, the loader's line for it
    assert run.stderr.count("no other native operator is built in this process") == 1
    outcomes = [eval(line) for line in run.stdout.strip().splitlines()[-4:]]
    assert [path for path, _ in outcomes] == [None] * 4
    first = f"building native operator {native.OPERATORS[0]} took over 1 s"
    assert outcomes[0][1] == f"RuntimeError: {first} (DALI_PIPES_BUILD_TIMEOUT)"
    assert all(why.startswith(f"BuildSkipped: not built: {first}") for _, why in outcomes[1:])


def test_a_bad_build_timeout_is_named(monkeypatch):
    monkeypatch.setenv("DALI_PIPES_BUILD_TIMEOUT", "soon")
    with pytest.raises(RuntimeError, match="DALI_PIPES_BUILD_TIMEOUT='soon' is not a positive"):
        native.build("policy_op")


@pytest.mark.skipif(not native.enabled(), reason="DALI_PIPES_NATIVE is off")
def test_an_unwritable_cache_builds_in_the_temporary_folder(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "DALI_PIPES_CACHE": str(blocker / "cache"),
           "TMPDIR": str(tmp_path / "tmp")}
    path, why, err = _probe(env)
    assert why is None and path, err
    mine = tmp_path / "tmp" / f"dali-pipes-native-{os.getuid()}"
    assert Path(path).is_relative_to(mine) and "cannot write" in err
    assert mine.stat().st_uid == os.getuid() and mine.stat().st_mode & 0o777 == 0o700
    # the prebuild step sees it there too (so it does not announce a build)
    cached = subprocess.run([sys.executable, "-c", "from dali_pipes.native.builder import "
                             "is_cached; print(is_cached('policy_op'))"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert cached.stdout.strip() == "True", cached.stderr


def test_turned_off_falls_back_and_says_so(tmp_path):
    path, why, _ = _probe({"DALI_PIPES_NATIVE": "0", "DALI_PIPES_CACHE": str(tmp_path)})
    assert path is None and why == "DALI_PIPES_NATIVE is off"
    assert not any(tmp_path.iterdir())


def test_without_a_compiler_falls_back_and_names_it(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    path, why, err = _probe({"DALI_PIPES_NATIVE": "1", "DALI_PIPES_CACHE": str(tmp_path / "c"),
                             "CXX": None, "PATH": str(empty)})
    assert path is None and "no C++ compiler" in why
    assert "using DALI's own operators instead" in err


def test_a_missing_source_is_an_error_naming_it():
    with pytest.raises(RuntimeError, match="no source .*nope.cc"):
        native.build("nope")


def _const(batch: list):
    return lambda: batch


def _policy_pipe(images, matrices, params, fused):
    n = len(images)
    pipe = Pipeline(batch_size=n, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        x, m, p = (fn.external_source(source=_const(a), layout=lay)
                   for a, lay in zip((images, matrices, params), ("HWC", None, None),
                                     strict=True))
        pipe.set_outputs(apply_policy(x, m, p, device="cpu", slots=1, fused=fused,
                                      recipe=image_recipe(auto_augment="randaugment")))
    pipe.build()
    return pipe


def _inputs(n=2, op="Rotate"):
    ops, mags = np.full((n, 1), OP[op]), np.full((n, 1), 10.0)
    images = [np.full((8, 10, 3), 100, np.uint8) for _ in range(n)]
    return images, list(affine_matrices(ops, mags, 8, 10)), list(photo_params(ops, mags))


@pytest.mark.parametrize("fused", [True])
def test_the_operator_rejects_a_bad_operation_index(fused, native_ops):
    images, matrices, params = _inputs()
    params[1] = params[1].copy()
    params[1][0, 9] = 99.0
    with pytest.raises(RuntimeError, match="sample 1 slot 0: operation index 99"):
        _policy_pipe(images, matrices, params, fused).run()


@pytest.mark.parametrize("fused", [True])
def test_the_operator_rejects_mismatched_params(fused, native_ops):
    images, matrices, params = _inputs()
    params[0] = np.zeros((1, 7), np.float32)
    with pytest.raises(RuntimeError, match=r"sample 0 needs \(slots, 2, 3\) matrices"):
        _policy_pipe(images, matrices, params, fused).run()


@pytest.mark.parametrize("fused", [True])
def test_the_operator_rejects_a_float_image(fused, native_ops):
    images, matrices, params = _inputs()
    images = [im.astype(np.float32) for im in images]
    with pytest.raises(RuntimeError, match="input 0 \\(images\\) must be uint8"):
        _policy_pipe(images, matrices, params, fused).run()


def test_requiring_the_fused_operator_when_off_says_why(monkeypatch):
    monkeypatch.setattr(native, "_loaded", {"policy_op": None})
    monkeypatch.setattr(native, "_reasons", {"policy_op": "DALI_PIPES_NATIVE is off"})
    images, matrices, params = _inputs()
    with pytest.raises(RuntimeError, match="fused policy operator is unavailable: DALI_PIP"):
        _policy_pipe(images, matrices, params, True)
    out = _policy_pipe(images, matrices, params, None).run()[0]  # falls back: composed
    assert np.asarray(out[0]).shape == (8, 10, 3)


def test_without_libjpeg_headers_the_jpeg_decoder_falls_back_in_one_line(tmp_path):
    """A compiler that finds no usable jpeglib.h: the JPEG crop decoder is unavailable,
    one line on stderr names the header and the package, and the graph keeps DALI's
    decoder; the other operators are unaffected."""
    shadow = tmp_path / "include"
    shadow.mkdir()
    (shadow / "jpeglib.h").write_text("#error no libjpeg here\n")
    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!/bin/sh\nexec {shutil.which('g++') or 'c++'} -I{shadow} \"$@\"\n")
    cxx.chmod(0o755)
    code = ("from dali_pipes import native; from dali_pipes.pipelines.config import "
            "PipelineConfig; from dali_pipes.pipelines.jpeg_partial import "
            "partial_decode_applies as a; print(repr(native.library('decode_crop_op'))); "
            "print(repr(a('cpu', PipelineConfig(), 'bilinear', None))); "
            "print(repr(native.why_not('decode_crop_op')))")
    env = {**os.environ, "DALI_PIPES_CXX": str(cxx), "DALI_PIPES_CACHE": str(tmp_path / "c")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr
    path, applies, why = (eval(line) for line in run.stdout.strip().splitlines()[-3:])
    assert path is None and applies is False
    assert "no jpeglib.h" in why and "libjpeg62-turbo-dev" in why
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("dali_pipes:")]
    assert len(lines) == 1 and "decode_crop_op unavailable, using DALI's own" in lines[0]
