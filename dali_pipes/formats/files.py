"""Reading a whole file without ever blocking on something that is not a regular file."""
from __future__ import annotations

import os
import stat

import numpy as np

from dali_pipes.formats.errors import FormatError


def read_file_bytes(path: str | os.PathLike) -> np.ndarray:
    """The bytes of the regular file at `path` as a uint8 array.

    The file is opened with O_NONBLOCK and checked with fstat before any read, so a FIFO,
    socket or device put where a file was expected is refused at once instead of blocking
    `open()` or `read()` forever.

    Args:
        path: the file.

    Returns:
        uint8 (n,) array of its bytes. FormatError (field "file") when it is not a regular
        file; OSError (naming it) when it cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(path, "file", "is not a regular file (a FIFO, socket or "
                              "device would block the reader)", value=_kind(st.st_mode),
                              expected="a regular file")
        data = np.empty(st.st_size, dtype=np.uint8)
        with os.fdopen(fd, "rb", closefd=False) as f:
            got = f.readinto(data.data)
        return data[:got or 0]
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISDIR, "directory")):
        if test(mode):
            return name
    return oct(mode)
