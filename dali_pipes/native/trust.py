"""Whether a folder, or a file in it, can be changed by this user only.

DALI maps a native library into the process (`plugin_manager.load_library`): a library that
another local user could write, or could swap through a folder they can write, would run
their code as this user. `unsafe_folder` walks a folder's path from the root as the kernel
does, following symbolic links, and names the first step someone else could change;
`read_own` reads a file only where it is this user's and nobody else can write it.

Folders on the way may belong to root and may be writable by others with the sticky bit set
(as /tmp is: others cannot rename or remove what is not theirs). The folder itself, the
files in it and the symbolic links on the way belong to this user (links: or to root).
Group write counts as write by others unless the group is this user's own (named after the
user, no other members: the "user private group" that a umask of 002 leaves writable).
"""
from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

_LINKS = 40  # symbolic links followed in one path at most (the kernel's limit)


def _own_group(gid: int) -> bool:
    """Whether group `gid` is this user's private group."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(gid)
    except KeyError:  # a number without a name: nobody's private group
        return False
    return gid == os.getgid() and group.gr_name == user and set(group.gr_mem) <= {user}


def _others_write(st: os.stat_result) -> bool:
    """Whether someone but the owner (and root) may write what `st` describes."""
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _own_group(st.st_gid)


def _own(path: Path, st: os.stat_result, what: str) -> str | None:
    """Why `path` (a `what`) is not this user's alone, or None."""
    if st.st_uid != os.getuid():
        return f"{path}: the {what} belongs to uid {st.st_uid}, not to this user ({os.getuid()})"
    if _others_write(st):
        return (f"{path}: the {what} is writable by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):#o})")
    return None


def _on_the_way(path: Path, st: os.stat_result) -> str | None:
    """Why the folder `path`, on the way to the one checked, lets others change it, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{path}: not a folder"
    if st.st_uid not in (0, os.getuid()):
        return f"{path}: the folder on the way belongs to uid {st.st_uid}"
    if _others_write(st) and not st.st_mode & stat.S_ISVTX:
        return (f"{path}: the folder on the way is writable by group or others without "
                f"the sticky bit (mode {stat.S_IMODE(st.st_mode):#o})")
    return None


def _link(path: Path, st: os.stat_result) -> str | None:
    if st.st_uid not in (0, os.getuid()):
        return f"{path}: the symbolic link belongs to uid {st.st_uid}"
    return None


def unsafe_folder(folder: Path) -> str | None:
    """None where `folder` is a folder of this user's that only this user (and root) can
    change, through every folder and link on its way; else what is wrong, naming the path."""
    current, links = Path("/"), 0
    try:
        pending = list(Path(os.getcwd(), folder).parts[1:])  # ".." stays: resolved as we walk
        problem = _on_the_way(current, os.lstat(current))
        while pending and problem is None:
            part = pending.pop(0)
            if part == "..":
                current = current.parent
                continue
            st = os.lstat(current / part)
            if not stat.S_ISLNK(st.st_mode):
                problem = _on_the_way(current / part, st)
                current = current / part
                continue
            links += 1
            if links > _LINKS:
                return f"{folder}: more than {_LINKS} symbolic links"
            problem = _link(current / part, st)
            target = Path(os.readlink(current / part))
            current = Path("/") if target.is_absolute() else current
            pending[:0] = target.parts[1:] if target.is_absolute() else target.parts
        return problem or _own(current, os.lstat(current), "folder")
    except OSError as e:
        return f"{e.filename or folder}: {e.strerror}"


def read_own(path: Path) -> bytes:
    """The bytes of `path`, a regular file (not a symbolic link) of this user's that nobody
    else can write; OSError saying why not otherwise. Checked on the open file, so what is
    read is what was checked."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        problem = None if stat.S_ISREG(st.st_mode) else f"{path}: not a regular file"
        problem = problem or _own(path, st, "file")
        if problem:
            raise PermissionError(problem)
        return f.read()
