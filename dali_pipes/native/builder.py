"""Compiling a native operator, bounded in time, and checking a library before DALI maps it.

`build(name)` returns the path of `lib<name>.so` in a folder only this user can change
(`folders.build_folder`: `cache_dir()/<key>/` where it may be used), the key hashing the
source, the shared headers (`*.h` here), the DALI version, the compiler and its flags. A
library is handed out only where it and its sidecar `lib<name>.so.sha256` are this user's
files that nobody else can write, and the sidecar (written after the library) records its
size, its sha256 and the key it was built from (`mismatch`): a truncated file (a full disk,
a half-synced shared home) would kill the process with SIGBUS when DALI loads it, and a
file someone else could write would run their code; otherwise the library is built anew.
Builds write per-process temporary names and rename them into place (the library, then the
sidecar), so concurrent first builds never expose a partial file.

The compiler runs in its own process group with a time limit (`DALI_PIPES_BUILD_TIMEOUT`
seconds, default 120); past it the whole group is killed (a compiler's children too) and
the build fails, so the caller falls back to DALI's own operators instead of stalling the
first batch; every later build of the process is skipped (`BuildSkipped`), so a hung
compiler costs one timeout, not one per operator. `DALI_PIPES_CXX` (else `CXX`, else g++,
c++, clang++) names the compiler.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from dali_pipes.native.folders import build_folder, private_folder
from dali_pipes.native.folders import cache_dir as cache_dir  # where it always was
from dali_pipes.native.trust import read_own, unsafe_folder

SOURCES = Path(__file__).resolve().parent
BUILD_TIMEOUT_S = 120.0  # default of DALI_PIPES_BUILD_TIMEOUT
BUILD_S = 8.0  # about one operator's compile time on one core (g++ -O3, DALI's headers)
# the sidecar's format, part of the key: another format gets other folders, so processes of
# an older version never build over this one's files, nor this one over theirs
_SIDECAR = b"size sha256 sources"
_FLAGS = ("-std=c++20", "-O3", "-fPIC", "-shared", "-ffp-contract=off")
_CUDA_HEADERS = ("cuda_runtime_api.h", "crt/host_config.h", "nv/target")
# operators that need a system library: (its header, the linker options, the package)
_SYSTEM_LIBS = {"decode_crop_op": ("jpeglib.h", ("-ljpeg",),
                                   "libjpeg-turbo's development files, e.g. "
                                   "apt-get install libjpeg62-turbo-dev")}
_stopped: list[str] = []  # the first build of this process that ran out of time
_stop_lock = threading.Lock()


class BuildSkipped(RuntimeError):
    """A build not tried: an earlier one in this process ran out of time (said once)."""


def build_timeout() -> float:
    """DALI_PIPES_BUILD_TIMEOUT in seconds (default 120); RuntimeError if not positive."""
    text = os.environ.get("DALI_PIPES_BUILD_TIMEOUT", "").strip()
    if not text:
        return BUILD_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise RuntimeError(f"DALI_PIPES_BUILD_TIMEOUT={text!r} is not a positive number of "
                           f"seconds")
    return value


def _compiler() -> str | None:
    for cand in (os.environ.get("DALI_PIPES_CXX"), os.environ.get("CXX"), "g++", "c++",
                 "clang++"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def _cuda_include() -> str | None:
    """A CUDA toolkit's include folder (CUDA_HOME, CUDA_PATH or /usr/local/cuda) with the
    headers DALI's include: the runtime's, crt/ and nv/ (a pip CUDA runtime alone lacks
    the last two)."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        inc = os.path.join(root, "include") if root else ""
        if inc and all(os.path.isfile(os.path.join(inc, h)) for h in _CUDA_HEADERS):
            return inc
    return None


def _cpu_flags() -> tuple[str, ...]:
    """-mfma and -mavx2 where the CPU has them: the operators use fused multiply-adds where
    torch's vectorised kernels do (without it each is a library call), and the resize's
    row passes vectorise 8 floats wide."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return ()
    return tuple(f"-m{f}" for f in ("fma", "avx2") if f in flags)


def _options(cxx: str, cuda_inc: str) -> list[str]:
    """The compiler and every option but the source and the output."""
    import nvidia.dali.sysconfig as sysconfig

    return [cxx, *_FLAGS, *_cpu_flags(), *sysconfig.get_compile_flags(), f"-I{cuda_inc}",
            *sysconfig.get_link_flags()]


def _system_lib(name: str, cxx: str, timeout: float) -> list[str]:
    """The linker options of the system library operator `name` needs (none for most);
    RuntimeError naming the package when the compiler cannot find its header."""
    if name not in _SYSTEM_LIBS:
        return []
    header, link, package = _SYSTEM_LIBS[name]
    code, _ = _run_bounded([cxx, "-fsyntax-only", "-x", "c++", "-"], timeout,
                           stdin=f"#include <cstdio>\n#include <{header}>\n".encode())
    if code is None:
        raise _stop(f"looking for {header} (native operator {name})", timeout)
    if code != 0:
        raise RuntimeError(f"no {header} for the compiler (install {package})")
    return list(link)


def _key(src: Path, options: list[str]) -> str:
    """The sources' digest (the cache key; its first 16 digits name the folder): the source,
    the shared headers, the DALI version, the compiler and its options, the sidecar's
    format."""
    import nvidia.dali as dali

    h = hashlib.sha256(src.read_bytes())
    for header in sorted(SOURCES.glob("*.h")):
        h.update(b"\0" + header.name.encode() + b"\0" + header.read_bytes())
    h.update(dali.__version__.encode())
    h.update("\0".join(options).encode())
    h.update(b"\0" + _SIDECAR)
    return h.hexdigest()


def _record(data: bytes, sources: str) -> str:
    """The sidecar's line of a library's bytes built from the sources' digest `sources`."""
    return f"{len(data)} {hashlib.sha256(data).hexdigest()} {sources}"


def _sidecar(lib: Path) -> Path:
    return lib.with_name(lib.name + ".sha256")


def mismatch(lib: Path, sources: str) -> str | None:
    """Why `lib` may not be loaded, or None: its folder must be this user's alone
    (`trust.unsafe_folder`), the library and its sidecar this user's files that nobody else
    can write, and the sidecar must record the library's size and sha256 and the digest of
    the `sources` it was built from."""
    problem = unsafe_folder(lib.parent)
    if problem:
        return problem
    try:
        recorded = read_own(_sidecar(lib)).decode(errors="replace").strip()
        data = read_own(lib)
    except OSError as e:
        return f"{e.filename}: {e.strerror}" if e.strerror else str(e)
    if recorded != _record(data, sources):
        return (f"{lib}: does not match the size and sha256 recorded beside it (truncated "
                f"or damaged), or was built from other sources")
    return None


def verified(lib: Path, sources: str) -> bool:
    """Whether `lib` may be loaded (`mismatch`)."""
    return mismatch(lib, sources) is None


def _cached(lib: Path, name: str, sources: str) -> bool:
    """Whether the cached `lib` can be loaded; a line on stderr when it is there but may
    not be."""
    problem = mismatch(lib, sources)
    if problem is None:
        return True
    if os.path.lexists(lib):
        print(f"dali_pipes: cached native operator {name} is not loaded ({problem}); "
              f"building it anew", file=sys.stderr)
    return False


def _plan(name: str) -> tuple[str, list[str], float]:
    """(the sources' digest, the compile command without "-o", the time limit) of `name`;
    RuntimeError saying why it cannot be built here (BuildSkipped after a timeout)."""
    if _stopped:
        raise BuildSkipped(f"not built: {_stopped[0]} earlier in this process")
    src = SOURCES / f"{name}.cc"
    if not src.is_file():
        raise RuntimeError(f"no source {src}")
    timeout = build_timeout()
    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler (set DALI_PIPES_CXX or CXX, or install g++)")
    cuda_inc = _cuda_include()
    if cuda_inc is None:
        raise RuntimeError("no CUDA toolkit headers (cuda_runtime_api.h, crt/, nv/ under "
                           "CUDA_HOME/include or /usr/local/cuda/include)")
    options = _options(cxx, cuda_inc) + _system_lib(name, cxx, timeout)
    return _key(src, options), [*options[:1], str(src), *options[1:]], timeout


def is_cached(name: str) -> bool:
    """Whether `build(name)` would find a library it may load, in the cache or in the
    folder it falls back to (no compiling); RuntimeError saying why it cannot be built
    here."""
    sources = _plan(name)[0]
    folder = build_folder(sources, say=False)
    return folder is not None and verified(folder / f"lib{name}.so", sources)


def build(name: str, rebuild: bool = False, *, announce: bool = True) -> str:
    """The path of a library of `name` that may be loaded (`mismatch`), compiling it first
    if needed (or if `rebuild`); RuntimeError saying why not. `announce` False leaves out
    the "building" line (a caller that reports progress itself)."""
    sources, command, timeout = _plan(name)
    lib = (build_folder(sources) or private_folder(sources)) / f"lib{name}.so"
    if rebuild or not _cached(lib, name, sources):
        _compile(name, command, lib, sources, timeout, announce)
        problem = mismatch(lib, sources)
        if problem:
            raise RuntimeError(f"built {lib}, which then did not check out: {problem}")
    return str(lib)


def _stop(what: str, timeout: float) -> RuntimeError:
    """The error of `what` having taken over `timeout` s. The first in this process also
    stops every later build in it (`_plan`), saying so in one line: a compiler that hangs
    would hang again, and each operator would wait its own timeout in turn."""
    why = f"{what} took over {timeout:g} s (DALI_PIPES_BUILD_TIMEOUT)"
    with _stop_lock:
        first = not _stopped
        _stopped.append(why)
    if first:
        print(f"dali_pipes: {why}; the compiler was stopped, and no other native operator "
              f"is built in this process (DALI's own operators instead)", file=sys.stderr)
    return RuntimeError(why)


def _compile(name: str, command: list[str], lib: Path, sources: str, timeout: float,
             announce: bool = True) -> None:
    """Run `command` + "-o TEMP" and rename TEMP to `lib`, then write its sidecar the same
    way; RuntimeError (the compiler's last lines, or the timeout) otherwise."""
    fd, tmp = tempfile.mkstemp(prefix=f".{lib.name}.{os.getpid()}.", dir=lib.parent)
    os.close(fd)
    side_tmp = f"{tmp}.sha256"
    if announce:
        print(f"dali_pipes: building native operator {name} (first use, ~{BUILD_S:g} s; "
              f"stopped after {timeout:g} s) into {lib}", file=sys.stderr)
    try:
        code, output = _run_bounded([*command, "-o", tmp], timeout)
        if code is None:
            raise _stop(f"building native operator {name}", timeout)
        if code != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise RuntimeError(f"{command[0]} failed (exit {code}) on {command[1]}:\n{tail}")
        os.chmod(tmp, 0o755)  # the linker's mode follows the umask: nobody else may write
        record = _record(read_own(Path(tmp)), sources)
        side = os.open(side_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(side, "w") as f:
            f.write(record + "\n")
        # atomic renames (concurrent builders each write their own temporary files); the
        # sidecar after the library, so a reader never trusts a library it does not describe
        os.replace(tmp, lib)
        os.replace(side_tmp, _sidecar(lib))
    finally:
        for leftover in (tmp, side_tmp):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _run_bounded(command: list[str], timeout: float, stdin: bytes | None = None
                 ) -> tuple[int | None, str]:
    """(exit code, stdout + stderr) of `command` run in its own process group, or (None,
    output so far) after killing the whole group at `timeout` seconds. The output goes to a
    temporary file, not a pipe, so a descendant that keeps it open cannot block us; so does
    `stdin` (None: nothing)."""
    with tempfile.TemporaryFile() as log, tempfile.TemporaryFile() as given:
        given.write(stdin or b"")
        given.seek(0)
        proc = subprocess.Popen(command, stdin=given, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = None
        except BaseException:  # an interrupt: the compiler's group goes too
            _kill_group(proc)
            raise
        log.seek(0)
        return code, log.read().decode(errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to `proc`'s process group (it leads it, and is not reaped yet, so the id is
    still the group's), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
