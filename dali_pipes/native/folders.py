"""Where a native library is built and loaded: a folder only this user can change.

`build_folder(key)` is `cache_dir()/<key>`, made with mode 0o700 where missing. Where that
cannot be written (a read-only home) or someone else could change it (`trust`: a folder
writable by others on the way, one owned by another user, a link to one), it is
`$TMPDIR/dali-pipes-native-<uid>/<key>`, used only where it is this user's alone too: a
predictable name in a shared folder can be made first by another user. Where neither will
do, `private_folder(key)` makes one no one else can know of (mkdtemp), for this process.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from dali_pipes.native.trust import unsafe_folder


def cache_dir() -> Path:
    """$DALI_PIPES_CACHE/native, or ~/.cache/dali-pipes/native (beside the sample data)."""
    root = os.environ.get("DALI_PIPES_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "dali-pipes")
    return Path(root) / "native"


def _make(folder: Path) -> None:
    """`folder` and its missing parents made, each with mode 0o700."""
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # made meanwhile: `unsafe_folder` judges it
            pass


def _usable(folder: Path) -> str | None:
    """None once `folder` exists (made where missing) and only this user can change it,
    else why not."""
    try:
        _make(folder)
    except OSError as e:
        return f"cannot write {e.filename or folder} ({e.strerror})"
    problem = unsafe_folder(folder)
    return problem and f"{problem}, so another user could replace native operators there"


def _fallback(key: str) -> Path:
    """Where the library of `key` goes when the cache cannot be used."""
    return Path(tempfile.gettempdir()) / f"dali-pipes-native-{os.getuid()}" / key[:16]


def build_folder(key: str, say: bool = True) -> Path | None:
    """The folder to build and load `key` in: the cache's; where that cannot be written or
    others could change it, this user's folder in the temporary directory (`_fallback`);
    None where that one is not this user's alone either (someone else made it first)."""
    folder = cache_dir() / key[:16]
    problem = _usable(folder)
    if problem is None:
        return folder
    alt = _fallback(key)
    alt_problem = _usable(alt)
    if say:
        where = alt if alt_problem is None else f"a new private folder ({alt_problem})"
        print(f"dali_pipes: {problem}; building in {where}", file=sys.stderr)
    return None if alt_problem else alt


_private_top: list[Path] = []  # this process's own temporary folder, once made


def private_folder(key: str) -> Path:
    """A folder for `key` inside a temporary folder made for this process (mkdtemp: mode
    0o700, an unpredictable name), removed when the process ends."""
    if not _private_top:
        top = Path(tempfile.mkdtemp(prefix="dali-pipes-native-"))
        atexit.register(_remove, top, os.getpid())
        _private_top.append(top)
    folder = _private_top[0] / key[:16]
    problem = _usable(folder)
    if problem:
        raise RuntimeError(problem)
    return folder


def _remove(top: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child
        shutil.rmtree(top, ignore_errors=True)
