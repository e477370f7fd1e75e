"""Class folders in a store other than local files (`s3://bucket/train/<class>/<file>`, any
listable store, one handed in included).

One listing call per root (`Store.list`: paths, sizes and versions of every object under
it), turned into the same `ClassFolderListing` a local folder gives, by the same rules:
classes are the visible first-level folders in sorted order (ids over the
sorted union of all roots), files in sub-folders of a class belong to it (folders in
sorted path order, files sorted within each, as the local walk), hidden entries and other
extensions are reported in `ignored`, objects directly under a root are not samples. The
listing's `mtimes_ns` hold each object's version (from its ETag or modification time), so
the digest changes when an object is replaced under the same name.
"""
from __future__ import annotations

from collections.abc import Sequence

from dali_pipes.sources.folders import (
    ClassFolderListing,
    FoundSamples,
    has_extension,
    is_hidden,
    no_class_folders,
    no_samples,
)

Objects = Sequence[tuple[str, int, int]]  # (path, size, version) of each object under a root


def list_remote_class_folders(urls: Sequence[str], objects: Sequence[Objects],
                              extensions: frozenset[str], kind: str, *,
                              recursive: bool = True) -> ClassFolderListing:
    """The listing of class folders under each of `urls` (one source per URL).

    Args:
        urls: the roots.
        objects: per root, every object under it (`Store.list`).
        extensions, kind, recursive: as for `list_class_folders`.

    Returns:
        The listing; ValueError names a URL with no class folders or no `kind` files.
    """
    roots = [u.rstrip("/") for u in urls]
    if not roots:
        raise ValueError("data: expected a URL or a non-empty list of URLs")
    ignored: list[tuple[str, str]] = []
    per_root = [_samples(root, found, extensions, recursive, ignored)
                for root, found in zip(roots, objects, strict=True)]
    classes = sorted({name for found in per_root for name in found})
    class_id = {name: i for i, name in enumerate(classes)}
    samples = FoundSamples()
    for source, (root, found) in enumerate(zip(roots, per_root, strict=True)):
        if not found:
            raise no_class_folders(root, kind)
        if not any(found.values()):
            raise no_samples(root, len(found), kind, extensions)
        for name in sorted(found):
            for url, size, version in found[name]:  # the version stands in the mtime slot
                samples.add(class_id, source, name, url, (size, version))
    return samples.listing(tuple(roots), tuple(classes), ignored)


def _samples(root: str, objects: Objects, extensions: frozenset[str],
             recursive: bool, ignored: list[tuple[str, str]]
             ) -> dict[str, list[tuple[str, int, int]]]:
    """{class name: [(url, size, version)] in listing order} for the objects under `root`."""
    found: dict[str, list[tuple[str, str, tuple[str, int, int]]]] = {}
    prefix = root + "/"
    for url, size, version in objects:
        if not url.startswith(prefix) or url.endswith("/"):
            continue  # elsewhere, or a folder marker object
        parts = url[len(prefix):].split("/")
        if len(parts) < 2 or is_hidden(parts[0]):
            continue  # not in a class folder, or in a hidden one: as the local listing
        if any(map(is_hidden, parts[1:-1])) or (len(parts) > 2 and not recursive):
            continue  # hidden sub-folders are not walked
        entries = found.setdefault(parts[0], [])
        why = _why_not(parts[-1], extensions)
        if why:
            ignored.append((url, why))
            continue
        entries.append((url.rsplit("/", 1)[0], parts[-1], (url, size, version)))
    return {name: [e[2] for e in sorted(entries, key=lambda e: (e[0], e[1]))]
            for name, entries in found.items()}


def _why_not(name: str, extensions: frozenset[str]) -> str | None:
    """As `is_sample` for a file entry: None, "hidden" or "other extension"."""
    if is_hidden(name):
        return "hidden"
    return None if has_extension(name, extensions) else "other extension"
