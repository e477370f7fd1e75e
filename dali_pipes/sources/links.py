"""The listings' rule for symbolic links inside a data folder (docs/data_sources.md).

An entry reached through a symlink (the entry is one, or a folder above it up to the data
root is) is followed when it resolves OUTSIDE the data root's tree and to nothing listed
before; it is left out, with its reason in the listing's `ignored`, when it resolves into
the tree (there it is listed under its own path, under its own class, or it is a loop back
to a folder being walked) or to something already listed through another link. Entries
reached without any symlink are listed as always (hard links included: they are separate
files to the file system). So no file is listed twice or under another class, and no walk
loops. A listing that left links out warns once, with their count.
"""
from __future__ import annotations

import os
import warnings

INSIDE = "symlink into the data folder (listed under its own path) or a loop"
REPEATED = "symlink to an entry already listed through another link"


class LinkRule:
    """Applies the rule for one data root; `seen` holds the real paths of the entries
    followed through links (only those: entries reached without links need none)."""

    def __init__(self, root: str | os.PathLike):
        self.root, self._given = os.path.realpath(root), os.path.abspath(root)
        self.seen: set[str] = set()
        self.left_out = 0

    def via_link(self, folder: str | os.PathLike) -> bool:
        """Whether `folder` (a path under the root as given) is reached through a link."""
        natural = os.path.normpath(os.path.join(self.root, os.path.relpath(folder, self._given)))
        return os.path.realpath(folder) != natural

    def why_not(self, path: str, via_link: bool) -> str | None:
        """None to list `path`, else why it is left out (counted)."""
        if not via_link:
            return None
        real = os.path.realpath(path)
        if self._inside(real):
            why: str | None = INSIDE
        elif real in self.seen:
            why = REPEATED
        else:
            self.seen.add(real)
            why = None
        self.left_out += why is not None
        return why

    def _inside(self, real: str) -> bool:
        """`real` is the root, in its tree, or above it (a link to an ancestor: a loop)."""
        root = self.root
        return real == root or real.startswith(os.path.join(root, "")) or \
            root.startswith(os.path.join(real, ""))

    def warn(self, stacklevel: int = 3) -> None:
        if self.left_out:
            warnings.warn(f"{self.root}: {self.left_out} symlink(s) left out: they lead back "
                          f"into the data folder or to entries already listed (see the "
                          f"listing's `ignored`)", RuntimeWarning, stacklevel=stacklevel)


__all__ = ["INSIDE", "REPEATED", "LinkRule"]
