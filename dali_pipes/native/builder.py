"""Compiling a native operator into the cache, bounded in time, and verifying a cached file
before DALI maps it.

`build(name)` returns the path of `lib<name>.so` under `cache_dir()/<key>/`, the key hashing
the source, the shared headers (`*.h` here), the DALI version, the compiler and its flags.
A cached library is used only if it matches its sidecar `lib<name>.so.sha256` (size and
sha256, written after the library): a truncated file (a full disk, a half-synced shared
home) would otherwise kill the process with SIGBUS when DALI loads it; on a mismatch the
library is built anew. Builds write per-process temporary names and rename them into place
(the library, then the sidecar), so concurrent first builds never expose a partial file.

The compiler runs in its own process group with a time limit (`DALI_PIPES_BUILD_TIMEOUT`
seconds, default 120); past it the whole group is killed (a compiler's children too) and
the build fails, so the caller falls back to DALI's own operators instead of stalling the
first batch. `DALI_PIPES_CXX` (else `CXX`, else g++, c++, clang++) names the compiler.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCES = Path(__file__).resolve().parent
BUILD_TIMEOUT_S = 120.0  # default of DALI_PIPES_BUILD_TIMEOUT
BUILD_S = 8.0  # about one operator's compile time on one core (g++ -O3, DALI's headers)
_FLAGS = ("-std=c++20", "-O3", "-fPIC", "-shared", "-ffp-contract=off")
_CUDA_HEADERS = ("cuda_runtime_api.h", "crt/host_config.h", "nv/target")
# operators that need a system library: (its header, the linker options, the package)
_SYSTEM_LIBS = {"decode_crop_op": ("jpeglib.h", ("-ljpeg",),
                                   "libjpeg-turbo's development files, e.g. "
                                   "apt-get install libjpeg62-turbo-dev")}


def cache_dir() -> Path:
    """$DALI_PIPES_CACHE/native, or ~/.cache/dali-pipes/native (beside the sample data)."""
    root = os.environ.get("DALI_PIPES_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dali-pipes")
    return Path(root) / "native"


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
    if code != 0:
        raise RuntimeError(f"no {header} for the compiler (install {package})")
    return list(link)


def _key(src: Path, options: list[str]) -> str:
    """The cache key: the source, the shared headers, the DALI version, the compiler and
    its options."""
    import nvidia.dali as dali

    h = hashlib.sha256(src.read_bytes())
    for header in sorted(SOURCES.glob("*.h")):
        h.update(b"\0" + header.name.encode() + b"\0" + header.read_bytes())
    h.update(dali.__version__.encode())
    h.update("\0".join(options).encode())
    return h.hexdigest()[:16]


def _digest(path: Path) -> str:
    """'SIZE SHA256' of a file (the sidecar's contents). No loop here: DALI's AutoGraph,
    tracing the graphs that ask for a library, rewrites loops in what they call into code
    that fails (NameError), which turned every native operator off."""
    data = path.read_bytes()  # a library of a few MB
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _sidecar(lib: Path) -> Path:
    return lib.with_name(lib.name + ".sha256")


def verified(lib: Path) -> bool:
    """Whether `lib` exists and matches the size and sha256 its sidecar recorded."""
    try:
        return lib.is_file() and _sidecar(lib).read_text().strip() == _digest(lib)
    except OSError:
        return False


def _cached(lib: Path, name: str) -> bool:
    """Whether the cached `lib` can be loaded; a line on stderr when it is there but does
    not match its sidecar."""
    if verified(lib):
        return True
    if lib.exists():
        print(f"dali_pipes: cached native operator {name} ({lib}) does not match its recorded "
              f"size and sha256 (truncated or damaged); building it anew", file=sys.stderr)
    return False


def _fallback(key: str) -> Path:
    """Where the library of `key` goes when the cache cannot be written."""
    return Path(tempfile.gettempdir()) / f"dali-pipes-native-{os.getuid()}" / key


def _folder(key: str) -> Path:
    """The cache folder of `key`, created; where the cache cannot be written (a read-only
    home, say), this user's temporary folder instead (`_fallback`)."""
    folder = cache_dir() / key
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError as e:
        alt = _fallback(key)
        print(f"dali_pipes: cannot write {cache_dir()} ({e.strerror}); building in {alt}",
              file=sys.stderr)
        alt.mkdir(parents=True, exist_ok=True)
        return alt


def _plan(name: str) -> tuple[Path, list[str], float]:
    """(the cached library's path, the compile command without "-o", the time limit) of
    `name`; RuntimeError saying why it cannot be built here."""
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
    lib = cache_dir() / _key(src, options) / f"lib{name}.so"
    return lib, [*options[:1], str(src), *options[1:]], timeout


def is_cached(name: str) -> bool:
    """Whether `build(name)` would find a verified library, in the cache or in the folder
    it falls back to (no compiling); RuntimeError saying why it cannot be built here."""
    lib = _plan(name)[0]
    if verified(lib):
        return True
    try:  # as `_folder`: the fallback is used only when the cache cannot be written
        lib.parent.mkdir(parents=True, exist_ok=True)
        return False
    except OSError:
        return verified(_fallback(lib.parent.name) / lib.name)


def build(name: str, rebuild: bool = False, *, announce: bool = True) -> str:
    """The verified cached library's path, compiling it first if needed (or if `rebuild`);
    RuntimeError saying why not. `announce` False leaves out the "building" line (a caller
    that reports progress itself)."""
    lib, command, timeout = _plan(name)
    if not rebuild and _cached(lib, name):
        return str(lib)
    folder = _folder(lib.parent.name)
    if folder != lib.parent:
        lib = folder / lib.name
        if not rebuild and _cached(lib, name):
            return str(lib)
    _compile(name, command, lib, timeout, announce)
    return str(lib)


def _compile(name: str, command: list[str], lib: Path, timeout: float,
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
            print(f"dali_pipes: building native operator {name} took over {timeout:g} s "
                  f"(DALI_PIPES_BUILD_TIMEOUT); the compiler was stopped", file=sys.stderr)
            raise RuntimeError(f"building {name} took over {timeout:g} s "
                               f"(DALI_PIPES_BUILD_TIMEOUT)")
        if code != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise RuntimeError(f"{command[0]} failed (exit {code}) on {command[1]}:\n{tail}")
        digest = _digest(Path(tmp))
        with open(side_tmp, "w") as f:
            f.write(digest + "\n")
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
