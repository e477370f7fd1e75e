"""Hyperspectral source: scenes of ENVI or SPE cubes with label maps -> patches (numpy only).

A folder holds scenes, each ``<scene>.hdr`` (+ its ENVI data file) or ``<scene>.spe``, beside a
label map ``<scene>.labels.npy`` of shape (lines, samples) and an integer dtype; 0 is unlabeled.
Scenes are numbered in sorted order of their file names (a list of folders: folder by folder).
A sample is the (P, P) patch centred on one labeled pixel: scenes in order, pixels row-major.
With ``labels=None`` no label map is read: the samples are the patches of a grid tiling each
scene, label -1 (``dali_pipes.sources.scene_pixels``).

Geometry: ENVI cubes are (bands, lines, samples). For SPE files the bands are the x axis, the
lines the frames and the samples the y axis, so a patch is frames ``y0:y1``, y-range ``x0:x1``.

Edges use numpy's ``"reflect"`` padding (mirror without repeating the edge pixel: ... 2 1 | 0 1 2
...), computed on the in-bounds window only, which equals padding the whole image and cropping;
patches larger than a scene keep mirroring as ``np.pad`` does. Only the window's bytes are read
(ENVI: only its rows and columns; SPE: of each of the window's frames, only the rows of its
samples, one contiguous run of bytes, then the selected band columns).

Files are validated when the source is made (``FormatError``); cubes are then opened lazily, once
per process, so the source pickles into DataLoader workers and forked children reopen their own
maps. A file that breaks between validation and a process's first read of it fails that read
(FormatError, handled per sample by the loader's on_error). A file truncated after it was
mapped fails the reads that need its missing bytes the same way: the readers check the file's
size before touching the map (a plain memmap would die of SIGBUS there).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dali_pipes.formats import FormatError, open_envi, open_spe
from dali_pipes.formats.cube import Cube
from dali_pipes.formats.label_map import read_label_map
from dali_pipes.geometry.bands import band_statistics, bands_in_range
from dali_pipes.geometry.draws import STREAM_PATCH, uniforms
from dali_pipes.sources.folders import is_sample, listing_digest, names_in
from dali_pipes.sources.links import LinkRule
from dali_pipes.sources.protocol import PatchSource
from dali_pipes.sources.remote_scenes import RemoteScenes
from dali_pipes.sources.scene_pixels import check_labels, grid_pixels, labelled_pixels
from dali_pipes.stores import Store
from dali_pipes.stores.select import open_store, store_paths

PathLike = str | os.PathLike
SCENE_SUFFIXES = {".hdr": "envi", ".spe": "spe"}
_SCENE_EXTENSIONS = frozenset(SCENE_SUFFIXES)
LABELS_SUFFIX = ".labels.npy"


@dataclass(frozen=True, eq=False)
class Scene:
    """One validated scene: its file, geometry (bands, lines, samples) and selected bands."""

    path: str
    kind: str  # "envi" | "spe"
    bands: int
    lines: int
    samples: int
    dtype: np.dtype
    wavelengths: np.ndarray | None
    source_id: int
    band_indices: list[int] | None = None  # None: all bands
    files: tuple[str, ...] = ()  # the files the data comes from (Cube.files)


def list_scene_files(data: PathLike | Sequence[PathLike]) -> list[tuple[str, int]]:
    """(scene file, source id) for every .hdr/.spe file, folder by folder, sorted by name."""
    roots = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    if not roots:
        raise ValueError("data: expected a folder or a non-empty list of folders")
    found = []
    for source_id, root in enumerate(map(Path, roots)):
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: data folder does not exist or is not a folder")
        rule = LinkRule(root)  # a scene linked to another of the folder is listed once
        with os.scandir(root) as entries:
            names = sorted(e.name for e in sorted(entries, key=lambda e: e.name)
                           if is_sample(e, _SCENE_EXTENSIONS) is None
                           and rule.why_not(e.path, e.is_symlink()) is None)
        rule.warn()
        if not names:
            raise ValueError(f"{root}: no scenes (expected <scene>.hdr or <scene>.spe files)")
        found += [(str(root / name), source_id) for name in names]
    return found


def open_cube(path: str) -> Cube:
    """The ENVI cube or SPE file at ``path`` (by suffix), validated on open."""
    kind = SCENE_SUFFIXES[Path(path).suffix.lower()]
    return open_envi(path) if kind == "envi" else open_spe(path)


def cube_geometry(cube: Cube) -> tuple[int, int, int]:
    """(bands, lines, samples) of any `Cube` (kept for callers of the old helper)."""
    return cube.geometry


def _scene(path: str, source_id: int, opener=open_cube) -> Scene:
    cube = opener(path)
    try:
        bands, lines, samples = cube.geometry
        dtype, wavelengths, files = np.dtype(cube.dtype), cube.wavelengths, cube.files
    finally:
        cube.close()
    if dtype.kind == "c":
        raise FormatError(path, "data type", "complex cubes cannot be loaded as patches",
                          value=str(dtype), expected="an integer or real float type")
    return Scene(path, SCENE_SUFFIXES[Path(path).suffix.lower()], bands, lines, samples,
                 dtype, wavelengths, source_id, files=files)


def label_map_path(scene_path: str) -> str:
    return str(Path(scene_path).with_suffix("")) + LABELS_SUFFIX


def load_label_map(scene: Scene) -> np.ndarray:
    """The scene's label map, checked (`read_label_map`): present, (lines, samples),
    integers, no negatives, fits int64; FormatError naming the file and field."""
    path = label_map_path(scene.path)
    if not os.path.isfile(path):
        raise FormatError(scene.path, "label map", "missing (labels=None loads scenes "
                          "without label maps: patches on a grid, label -1)", expected=path)
    return read_label_map(path, (scene.lines, scene.samples))


def _local_stat(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _scenes_digest(data, scenes: list[Scene], label_maps: list[np.ndarray],
                   stat=_local_stat) -> str:
    roots = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    stats, extra = [], hashlib.sha256()
    for scene, labels in zip(scenes, label_maps, strict=True):
        stats += [stat(f) for f in scene.files]
        extra.update(str(labels.dtype).encode() + repr(labels.shape).encode())
        extra.update(np.ascontiguousarray(labels).tobytes())
    stat_arr = np.asarray(stats, np.int64)
    return listing_digest([s.path for s in scenes],
                          [str(r).rstrip("/") if "://" in str(r) else os.fspath(Path(r))
                           for r in roots],
                          np.array([s.source_id for s in scenes], np.int64),
                          stat_arr[:, 0], stat_arr[:, 1], extra=extra.digest())


def _is_range(bands) -> bool:
    return (isinstance(bands, (tuple, list)) and len(bands) == 2
            and any(isinstance(b, (float, np.floating)) for b in bands))


def _indices_for(scene: Scene, bands) -> list[int] | None:
    if bands is None:
        return None
    if _is_range(bands):
        try:
            return bands_in_range(scene.wavelengths, float(bands[0]), float(bands[1]))
        except ValueError as exc:
            raise ValueError(f"bands={tuple(bands)!r} (a wavelength range in nm) for scene "
                             f"{scene.path}: {exc}") from exc
    if isinstance(bands, (str, bytes)) or not isinstance(bands, (Sequence, np.ndarray)):
        raise ValueError(f"bands must be None, a sequence of band indices or a (low_nm, "
                         f"high_nm) range of floats, got {bands!r}")
    out = [int(b) for b in bands if isinstance(b, (int, np.integer)) and not isinstance(b, bool)]
    if len(out) != len(bands) or not out or not all(0 <= b < scene.bands for b in out):
        raise ValueError(f"bands={list(bands)!r}: need band indices in [0, {scene.bands}) for "
                         f"scene {scene.path} (a wavelength range is given as floats, e.g. "
                         f"(400.0, 700.0))")
    return out


def select_scene_bands(scenes: list[Scene], bands) -> list[Scene]:
    """Scenes with their selected band indices; every scene must give the same band count."""
    chosen = [dataclasses.replace(s, band_indices=_indices_for(s, bands)) for s in scenes]
    counts = {s.path: s.bands if s.band_indices is None else len(s.band_indices) for s in chosen}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{Path(p).name}: {n}" for p, n in counts.items())
        raise ValueError(f"bands={bands!r} selects a different number of bands per scene "
                         f"({listed}); every scene must give the same number")
    return chosen


def patch_augment(seed: int, epoch: int, index: np.ndarray, *, train: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flip_h, flip_v, k) per sample, pure functions of (seed, epoch, index). The patch
    becomes ``np.rot90(flip(x), k, axes=(1, 2))`` with flips of the W (h) and H (v) axes."""
    if not train:
        zeros = np.zeros(len(index), dtype=np.int32)
        return zeros, zeros.copy(), zeros.copy()
    u = uniforms(seed, epoch, np.asarray(index, dtype=np.int64), STREAM_PATCH, 3)
    return ((u[:, 0] < 0.5).astype(np.int32), (u[:, 1] < 0.5).astype(np.int32),
            np.minimum(np.floor(u[:, 2] * 4), 3).astype(np.int32))


class HyperspectralSource(PatchSource):
    """Patches around the labeled pixels of every scene under ``data`` (one or more folders).

    ``bands``: None (all), a sequence of band indices, or a ``(low_nm, high_nm)`` range of
    floats resolved per scene with ``bands_in_range``. Patches come back in ``self.dtype``, the
    common numpy type of all scenes (the loader casts to float32).

    ``data`` may be in another store than local files (``store``: URLs, a store handed in;
    `dali_pipes.sources.remote_scenes`: folders of a listable store or the scenes' own
    paths), read window by window through it (default: local files, or an FsspecStore
    without cache for URLs).

    ``labels``: "map" (each scene's label map) or None (no label maps: a grid of patches
    per scene, label -1; `dali_pipes.sources.scene_pixels`).
    """

    def __init__(self, data: PathLike | Sequence[PathLike], *, patch_size: int = 9,
                 bands=None, store: Store | None = None, labels: str | None = "map"):
        if isinstance(patch_size, bool) or not isinstance(patch_size, (int, np.integer)) \
                or patch_size < 1 or patch_size % 2 == 0:
            raise ValueError(f"patch_size must be a positive odd int, got {patch_size!r}")
        self.patch_size, self.label_mode = int(patch_size), check_labels(labels)
        store = store or open_store(data)
        roots = store_paths(data, store)
        self.remote = RemoteScenes(roots, store) if roots else None
        files = self.remote.scene_files if self.remote else list_scene_files(data)
        scenes = [_scene(path, source, self._open) for path, source in files]
        self.scenes = select_scene_bands(scenes, bands)
        self.dtype = np.result_type(*[s.dtype for s in self.scenes])
        label_maps = [self._label_map(s) for s in self.scenes]
        self._digest = _scenes_digest(data, self.scenes, label_maps,
                                      self.remote.stat if self.remote else _local_stat)
        self._build_table(self._pixels(label_maps))
        if len(self.labels) == 0:
            raise ValueError(f"{data}: no labeled pixel in any label map (0 means unlabeled)")
        self._cubes: dict[int, Cube] = {}
        self._pid = os.getpid()

    def _open(self, path: str) -> Cube:
        return self.remote.open(path) if self.remote is not None else open_cube(path)

    def _label_map(self, scene: Scene) -> np.ndarray:
        """The scene's label map; with labels=None, the grid step in its place (hashed into
        the listing digest)."""
        if self.label_mode is None:
            return np.array([-1, self.patch_size], np.int64)
        if self.remote is not None:
            return self.remote.label_map(scene.path, (scene.lines, scene.samples))
        return load_label_map(scene)

    def _pixels(self, label_maps: list[np.ndarray]) -> list[tuple[np.ndarray, ...]]:
        """Per scene (lines, samples, labels) of its patch centres."""
        if self.label_mode is None:
            return [grid_pixels(s.lines, s.samples, self.patch_size) for s in self.scenes]
        return [labelled_pixels(m) for m in label_maps]

    def listing_digest(self) -> str:
        """Scene names (relative to their folder), the sizes and modification times of each
        scene's files (header and ENVI data file) and the contents of every label map (with
        labels=None: the grid step)."""
        return self._digest

    def _build_table(self, pixels: list[tuple[np.ndarray, ...]]) -> None:
        ids = [np.full(len(ys), scene_id, dtype=np.int64)
               for scene_id, (ys, _, _) in enumerate(pixels)]
        self.scene_ids = np.concatenate(ids)
        self.positions = np.stack([np.concatenate([p[0] for p in pixels]),
                                   np.concatenate([p[1] for p in pixels])], axis=1)
        self.labels = np.concatenate([p[2] for p in pixels])
        self.source_ids = np.array([s.source_id for s in self.scenes],
                                   dtype=np.int64)[self.scene_ids]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_bands(self) -> int:
        first = self.scenes[0]
        return first.bands if first.band_indices is None else len(first.band_indices)

    def path(self, index: int) -> str:
        return self.scenes[self.scene_ids[index]].path

    def wavelengths(self, scene: int) -> np.ndarray | None:
        """Wavelengths of the selected bands of scene number ``scene`` (None if unknown)."""
        s = self.scenes[scene]
        if s.wavelengths is None or s.band_indices is None:
            return s.wavelengths
        return s.wavelengths[s.band_indices]

    def cube(self, scene: int):
        """Scene ``scene``'s open cube in this process (opened and re-checked on first use)."""
        if self._pid != os.getpid():  # a forked child: never share another process's maps
            self._cubes, self._pid = {}, os.getpid()
        cube = self._cubes.get(scene)
        if cube is None:
            s = self.scenes[scene]
            cube = self._open(s.path)
            if cube.geometry != (s.bands, s.lines, s.samples) or cube.dtype != s.dtype:
                found = (cube.geometry, str(cube.dtype))
                cube.close()
                raise FormatError(s.path, "geometry", "changed since the loader was made",
                                  value=found, expected=((s.bands, s.lines, s.samples),
                                                         str(s.dtype)))
            self._cubes[scene] = cube
        return cube

    def read(self, index: int, request: None = None) -> np.ndarray:
        """Sample ``index``: (n_bands, P, P) in ``self.dtype``, reflect-padded at the edges."""
        y, x = (int(v) for v in self.positions[index])
        return self._centred(int(self.scene_ids[index]), y, x)

    def _centred(self, scene: int, y: int, x: int) -> np.ndarray:
        """The (n_bands, P, P) patch of scene ``scene`` centred on line ``y``, sample ``x``."""
        s, r = self.scenes[scene], self.patch_size // 2
        y0, y1 = max(0, y - r), min(s.lines, y + r + 1)
        x0, x1 = max(0, x - r), min(s.samples, x + r + 1)
        window = self.cube(scene).read_window(y0, x0, y1 - y0, x1 - x0, s.band_indices)
        pad = ((0, 0), (y0 - (y - r), y + r + 1 - y1), (x0 - (x - r), x + r + 1 - x1))
        if any(any(p) for p in pad):
            window = np.pad(window, pad, mode="reflect")
        return np.ascontiguousarray(window, dtype=self.dtype)

    def band_stats(self, scene: int, *, max_rows: int = 64, device: str = "cpu"
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Per-band (mean, std) float32 of the selected bands over up to ``max_rows`` evenly
        spaced whole lines of the scene (NaNs ignored; a zero or unknown std becomes 1),
        computed on ``array_module(device)`` (CuPy for a CUDA device when it is usable)."""
        s = self.scenes[scene]
        rows = np.unique(np.linspace(0, s.lines - 1, min(s.lines, max_rows)).round())
        cube = self.cube(scene)
        values = np.concatenate([cube.read_window(int(y), 0, 1, s.samples, s.band_indices)
                                 .reshape(-1, s.samples) for y in rows], axis=1)
        return band_statistics(values, device=device)

    def close(self) -> None:
        """Close this process's cubes (they reopen on the next read)."""
        for cube in self._cubes.values():
            cube.close()
        self._cubes = {}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cubes"], state["_pid"] = {}, None  # the receiving process opens its own
        return state


def holds_scenes(data) -> bool:
    """Whether the folder `data` holds ENVI or SPE scene files."""
    return any(os.path.splitext(n)[1].lower() in SCENE_SUFFIXES for n in names_in(data))
