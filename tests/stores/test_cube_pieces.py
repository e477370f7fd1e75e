"""Cube windows taken out of cached blocks without copying them (`read_pieces`): the same
values as the local memory map for every interleave, data type, byte order and header
offset, band selection (none, a range, unsorted, repeated, one) and window position, with
blocks so small that runs and elements cross them, and with no cache (one piece)."""
from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import numpy as np
import pytest

from dali_pipes.formats import open_envi
from dali_pipes.sample_data.sample_hyperspectral import small_scene_folder
from dali_pipes.sources.hyperspectral import HyperspectralSource, open_cube
from dali_pipes.stores.remote import FsspecStore

LINES, SAMPLES, BANDS = 9, 11, 7
CODES = {"int16": 2, "float32": 4, "float64": 5, "uint16": 12}
ORDER = {"bsq": (2, 0, 1), "bil": (0, 2, 1), "bip": (0, 1, 2)}  # from (lines, samples, bands)


def write_envi(folder: Path, name: str, interleave: str, dtype: str, offset: int,
               big: bool) -> np.ndarray:
    """An ENVI cube written byte by byte (`offset` junk bytes before the data); returns its
    values (lines, samples, bands)."""
    rng = np.random.default_rng(len(name) + offset)
    values = rng.integers(-999, 999, (LINES, SAMPLES, BANDS)).astype(dtype)
    stored = values.transpose(ORDER[interleave]).astype(np.dtype(dtype).newbyteorder(
        ">" if big else "<"))
    (folder / f"{name}.hdr").write_text(
        f"ENVI\nsamples = {SAMPLES}\nlines = {LINES}\nbands = {BANDS}\nheader offset = "
        f"{offset}\nfile type = ENVI Standard\ndata type = {CODES[dtype]}\ninterleave = "
        f"{interleave}\nbyte order = {int(big)}\n")
    (folder / f"{name}.img").write_bytes(b"\x7f" * offset + stored.tobytes())
    np.save(folder / f"{name}.labels.npy", np.ones((LINES, SAMPLES), np.int32))
    return values


@pytest.fixture(scope="module")
def cubes(tmp_path_factory) -> tuple[Path, str]:
    """Every interleave with int16 (odd header offset), float32 big-endian and float64
    (an offset cutting its elements across 8-byte boundaries), locally and in memory://."""
    root = tmp_path_factory.mktemp("pieces") / "scenes"
    root.mkdir()
    for interleave in ("bsq", "bil", "bip"):
        write_envi(root, f"{interleave}_i2", interleave, "int16", 3, False)
        write_envi(root, f"{interleave}_f4", interleave, "float32", 0, True)
        write_envi(root, f"{interleave}_f8", interleave, "float64", 12, False)
    small_scene_folder(root / "spe", lines=LINES, samples=SAMPLES, bands=BANDS, seed=2)
    fs = fsspec.filesystem("memory")
    prefix = f"memory://pieces-{uuid.uuid4().hex[:8]}"
    for path in root.rglob("*"):
        if path.is_file():
            fs.pipe(f"{prefix}/{path.relative_to(root).as_posix()}", path.read_bytes())
    return root, prefix


WINDOWS = [(0, 0, 1, 1), (0, 0, LINES, SAMPLES), (3, 4, 5, 5), (LINES - 2, SAMPLES - 3, 2, 3),
           (2, 0, 4, SAMPLES)]
BANDS_ASKED = [None, [2, 3, 4], [5, 0, 3], [1, 1, 6], [4]]


def _remote(prefix: str, folder: str, **store) -> HyperspectralSource:
    return HyperspectralSource(f"{prefix}/{folder}", patch_size=1,
                               store=FsspecStore(**store))


@pytest.mark.parametrize("block", [61, 256, 1 << 20])
def test_windows_from_cached_pieces_are_the_local_windows(cubes, tmp_path, block):
    root, prefix = cubes
    cached = _remote(prefix, "", cache_dir=str(tmp_path / "cache"), block_size=block)
    bare = _remote(prefix, "")
    local = HyperspectralSource(root, patch_size=1)
    assert [Path(s.path).name for s in cached.scenes] == \
        [Path(s.path).name for s in local.scenes]
    for scene in range(len(local.scenes)):
        want_cube = local.cube(scene)
        for y, x, h, w in WINDOWS:
            for bands in BANDS_ASKED:
                want = want_cube.read_window(y, x, h, w, bands)
                for source in (cached, cached, bare):  # cold, warm (mapped), no cache
                    got = source.cube(scene).read_window(y, x, h, w, bands)
                    assert got.dtype == want.dtype and got.flags.c_contiguous
                    np.testing.assert_array_equal(got, want, err_msg=(
                        f"{local.scenes[scene].path} {(y, x, h, w)} bands={bands}"))


def test_spe_windows_from_cached_pieces_are_the_local_windows(cubes, tmp_path):
    root, prefix = cubes
    remote = _remote(prefix, "spe", cache_dir=str(tmp_path / "cache"), block_size=100)
    scene = [s.path for s in remote.scenes].index(f"{prefix}/spe/c.spe")
    local = open_cube(str(root / "spe" / "c.spe"))
    for y, x, h, w in WINDOWS:
        for bands in BANDS_ASKED:
            np.testing.assert_array_equal(remote.cube(scene).read_window(y, x, h, w, bands),
                                          local.read_window(y, x, h, w, bands))


def test_a_window_is_copied_out_of_the_mapped_blocks(cubes, tmp_path):
    """Warm: the pieces are views of the mapped block files, never whole copies; what the
    window returns is its own array (writing it leaves the cache alone)."""
    root, prefix = cubes
    store = FsspecStore(cache_dir=str(tmp_path / "cache"), block_size=64)
    url = f"{prefix}/bil_i2.img"
    size, version = store.stat(url)
    want = np.frombuffer((root / "bil_i2.img").read_bytes(), np.uint8)
    store.read_range(url, 0, size, (size, version))  # every block cached
    pieces = store.read_pieces(url, 10, 200, (size, version))
    assert [at for at, _ in pieces] == [10, 64, 128, 192]
    assert all(p.base is not None and not p.flags.writeable for _, p in pieces)
    np.testing.assert_array_equal(np.concatenate([p for _, p in pieces]), want[10:210])
    local = open_envi(root / "bil_i2.hdr")
    remote = _remote(prefix, "", cache_dir=str(tmp_path / "cache"), block_size=64)
    scene = [Path(s.path).name for s in remote.scenes].index("bil_i2.hdr")
    window = remote.cube(scene).read_window(1, 2, 3, 4)
    window[:] = 0
    np.testing.assert_array_equal(remote.cube(scene).read_window(1, 2, 3, 4),
                                  local.read_window(1, 2, 3, 4))


def test_a_listed_object_pickles_without_its_reader(cubes, tmp_path):
    """The pieces reader bound in one process stays there: a copy binds its own."""
    import pickle
    root, prefix = cubes
    remote = _remote(prefix, "", cache_dir=str(tmp_path / "cache"), block_size=256)
    scene = [Path(s.path).name for s in remote.scenes].index("bip_f8.hdr")
    obj = remote.cube(scene)._read
    first = obj.pieces(12, 300)
    copy = pickle.loads(pickle.dumps(obj))
    assert "_reader" in obj.__dict__ and "_reader" not in copy.__dict__
    np.testing.assert_array_equal(np.concatenate([p for _, p in copy.pieces(12, 300)]),
                                  np.concatenate([p for _, p in first]))
