"""Hyperspectral scenes in a store other than local files (URLs, a store handed in): ENVI and
SPE cubes read window by window in byte ranges.

`data` names folders of a listable store (`s3://bucket/scenes/`: one listing call each; the
scenes are the `.hdr` / `.spe` objects directly under it, as locally) or the scenes' own
paths (`https://host/a.hdr`, a list of them: web servers cannot list folders). A scene's
files are found beside it by the local rules (`data_file_candidates`, `<scene>.labels.npy`):
from the listing, else with one stat per candidate. Headers are read once per process (SPE:
the 4100-byte header and the XML footer); the label map is read once, when the source is
made; windows are read through `dali_pipes.formats.ranged_cube` via the store (retries,
timeouts, block cache).
"""
from __future__ import annotations

from pathlib import PurePosixPath

import numpy as np

from dali_pipes.formats.cube import Cube
from dali_pipes.formats.envi import data_file_candidates, parse_envi_header
from dali_pipes.formats.errors import FormatError
from dali_pipes.formats.label_map import parse_label_map
from dali_pipes.formats.ranged_cube import RangedEnviCube, RangedSpeFile
from dali_pipes.formats.spe import (
    SPE_HEADER_BYTES,
    footer_range,
    parse_spe_footer,
    parse_spe_header,
    spe_layout,
)
from dali_pipes.sources.folders import is_hidden
from dali_pipes.sources.object_reads import ListedObject
from dali_pipes.stores import Store
from dali_pipes.stores.select import can_list

SCENE_SUFFIXES = (".hdr", ".spe")


def _is_scene(url: str) -> bool:
    return url.lower().endswith(SCENE_SUFFIXES)


class RemoteScenes:
    """The scenes under `urls` (folders or scene URLs, one source each) and their objects."""

    def __init__(self, urls: list[str], store: Store):
        self.store = store
        self.objects: dict[str, tuple[int, int]] = {}  # url -> (size, version), listed
        self.scene_files: list[tuple[str, int]] = []
        self._listed: set[str] = set()  # folders whose every object is in `objects`
        for source_id, url in enumerate(urls):
            scenes = [url] if _is_scene(url) else self._list(url)
            self.scene_files += [(s, source_id) for s in scenes]
        self._opened: dict[str, Cube] = {}

    def _list(self, url: str) -> list[str]:
        try:
            if not can_list(self.store):
                raise ValueError(f"{type(self.store).__name__} cannot list")
            listed = self.store.list(url)
        except ValueError as exc:  # http(s): no listing
            raise ValueError(f"{url}: this folder cannot be listed; give the scenes' own "
                             "paths instead (a list of <scene>.hdr / <scene>.spe paths or "
                             f"URLs). {exc}") from exc
        prefix = url.rstrip("/") + "/"
        self._listed.add(url.rstrip("/"))
        scenes = []
        for obj, size, version in listed:
            self.objects[obj] = (size, version)
            name = obj[len(prefix):]
            if obj.startswith(prefix) and "/" not in name and not is_hidden(name) \
                    and _is_scene(name):
                scenes.append(obj)
        if not scenes:
            raise ValueError(f"{url}: no scenes (expected <scene>.hdr or <scene>.spe objects)")
        return sorted(scenes)

    def stat(self, url: str) -> tuple[int, int]:
        """(size, version) of `url`: from the listing, else one stat (StoreError)."""
        if url not in self.objects:
            self.objects[url] = self.store.stat(url)
        return self.objects[url]

    def _find(self, scene: str, names: list[str], field: str) -> str:
        """The URL of the first of `names` beside `scene` that exists."""
        folder = scene.rsplit("/", 1)[0]
        listed = {u.lower(): u for u in reversed(sorted(self.objects))
                  if u.rsplit("/", 1)[0] == folder}
        for name in names:
            url = f"{folder}/{name}"
            found = listed.get(url.lower()) if url not in self.objects else url
            if found:
                return found
            if folder not in self._listed:  # not listed: ask the server
                try:
                    self.stat(url)
                    return url
                except FileNotFoundError:
                    pass
        raise FormatError(scene, field, "missing", expected=f"one of {names} beside it")

    def reader(self, url: str) -> ListedObject:
        return ListedObject(self.store, url, *self.stat(url))

    def open(self, scene: str) -> Cube:
        """The scene's cube (its header read once per process)."""
        cube = self._opened.get(scene)
        if cube is None:
            cube = self._open_envi(scene) if scene.lower().endswith(".hdr") else \
                self._open_spe(scene)
            self._opened[scene] = cube
        return cube

    def _open_envi(self, scene: str) -> Cube:
        header = parse_envi_header(scene, self.reader(scene).whole().decode("latin-1"))
        data_url = self._find(scene, data_file_candidates(scene.rsplit("/", 1)[1]),
                              "data file")
        found = self.stat(data_url)[0]
        expected = header.header_offset + header.samples * header.lines * header.bands * \
            header.dtype.itemsize
        if found != expected:
            what = "truncated" if found < expected else "larger than the header says"
            raise FormatError(data_url, "data size", f"data file is {what} (header {scene})",
                              value=f"{found} bytes", expected=f"{expected} bytes")
        return RangedEnviCube(scene, data_url, header, self.reader(data_url))

    def _open_spe(self, scene: str) -> Cube:
        read = self.reader(scene)
        header = parse_spe_header(scene, read(0, min(SPE_HEADER_BYTES, read.size)).tobytes())
        root = None
        if header.version >= 3:
            start, end = footer_range(scene, header, read.size)
            root = parse_spe_footer(scene, read(start, end - start).tobytes())
        return RangedSpeFile(scene, header, spe_layout(scene, header, root, read.size), read)

    def label_map(self, scene: str, shape: tuple[int, int]) -> np.ndarray:
        """The scene's `<scene>.labels.npy`, read once (FormatError when missing or bad)."""
        name = PurePosixPath(scene.rsplit("/", 1)[1]).stem + ".labels.npy"
        url = self._find(scene, [name], "label map")
        return parse_label_map(self.reader(url).whole(), url, shape)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_opened": {}}  # each process reads its own headers
