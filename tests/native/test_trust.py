"""dali_pipes.native builds and hands DALI a library only in a folder this user alone can
change: a cache folder others can write (directly, through a link, or owned by another
user) and a temporary folder another user made first are not used, nor is a library
whose bytes, owner or mode do not match what this user's build recorded. The compiler here
writes its output file and nothing else (the real one is covered by test_native.py)."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from dali_pipes import native
from dali_pipes.native import builder, folders

OTHER = 4242  # a uid (and gid) of nobody here: "another user"
as_root = pytest.mark.skipif(os.getuid() != 0, reason="making another user's files needs root")
# a compiler that counts its runs and writes the contents of the file beside it
_CXX = """#!/bin/sh
echo "$@" >> "$0.calls"
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then cat "$0.out" > "$2"; fi
  shift
done
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A compiler that writes "built", the cache in tmp_path/cache, the temporary folder
    tmp_path/tmp (a fresh private folder for this process's last resort too)."""
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    cxx = tmp_path / "cxx"
    cxx.write_text(_CXX)
    cxx.chmod(0o755)
    (tmp_path / "cxx.out").write_text("built\n")
    monkeypatch.setenv("DALI_PIPES_CXX", str(cxx))
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(folders, "_private_top", [])
    return tmp_path


def _plant(env: Path, cache: Path, monkeypatch, uid: int | None = None) -> Path:
    """Another user's library, built with `cache` as the cache as ours are, sidecar and all,
    but of other bytes ("evil"); the library's folder and files then belong to `uid`."""
    (env / "cxx.out").write_text("evil\n")
    monkeypatch.setenv("DALI_PIPES_CACHE", str(cache))
    lib = Path(builder.build("policy_op"))
    monkeypatch.setenv("DALI_PIPES_CACHE", str(env / "cache"))
    (env / "cxx.out").write_text("built\n")
    if uid is not None:
        for p in (lib.parent, lib, Path(f"{lib}.sha256")):
            os.chown(p, uid, uid)
    return lib


def _built(path: str) -> Path:
    """`path` after checking it holds this test compiler's output."""
    assert Path(path).read_bytes() == b"built\n"
    return Path(path)


def _runs(env: Path) -> int:
    """How many times the compiler ran."""
    return len((env / "cxx.calls").read_text().splitlines())


def test_a_cache_folder_others_can_write_is_not_used(env, capsys, monkeypatch):
    """Their library there, with a sidecar that matches it: neither loaded nor replaced."""
    planted = _plant(env, env / "cache", monkeypatch)
    native_dir = env / "cache" / "native"
    native_dir.chmod(0o777)
    capsys.readouterr()
    path = _built(builder.build("policy_op"))
    assert not path.is_relative_to(env / "cache")
    assert path.is_relative_to(env / "tmp" / f"dali-pipes-native-{os.getuid()}")
    err = capsys.readouterr().err
    assert f"{native_dir}: the folder on the way is writable by group or others" in err
    assert "so another user could replace native operators there" in err
    assert planted.read_bytes() == b"evil\n"  # nothing written there either
    assert builder.is_cached("policy_op")  # where it was built, not where it was planted


@as_root
@pytest.mark.parametrize("which", ["native", "key"], ids=["on the way", "the folder"])
def test_a_folder_writable_by_another_group_is_not_used(env, capsys, monkeypatch, which):
    planted = _plant(env, env / "cache", monkeypatch)
    folder = planted.parent if which == "key" else planted.parent.parent
    os.chown(folder, os.getuid(), OTHER)
    folder.chmod(0o775)
    path = _built(builder.build("policy_op"))
    assert not path.is_relative_to(env / "cache") and planted.read_bytes() == b"evil\n"
    assert f"{folder}: the folder " in (err := capsys.readouterr().err)
    assert "is writable by group or others" in err and "(mode 0o775)" in err


def test_a_cache_that_links_to_a_folder_others_can_write_is_not_used(env, capsys,
                                                                    monkeypatch):
    shared = env / "shared"
    planted = _plant(env, shared, monkeypatch)
    (shared / "native").chmod(0o777)
    (env / "cache").mkdir()
    (env / "cache" / "native").symlink_to(shared / "native", target_is_directory=True)
    capsys.readouterr()
    path = _built(builder.build("policy_op"))
    assert not path.is_relative_to(env / "cache") and not path.is_relative_to(shared)
    assert f"{shared / 'native'}: the folder on the way is writable" in capsys.readouterr().err
    assert planted.read_bytes() == b"evil\n"


@as_root
def test_a_cache_of_another_user_is_not_used_directly_or_through_a_link(env, capsys,
                                                                       monkeypatch):
    """Their folder, even closed to others (0o755), through our link to it."""
    theirs = env / "theirs"
    planted = _plant(env, theirs, monkeypatch, uid=OTHER)
    os.chown(theirs / "native", OTHER, OTHER)
    (env / "cache").mkdir()
    (env / "cache" / "native").symlink_to(theirs / "native", target_is_directory=True)
    capsys.readouterr()
    path = _built(builder.build("policy_op"))
    assert not path.is_relative_to(theirs) and planted.read_bytes() == b"evil\n"
    assert "the folder on the way belongs to uid 4242" in capsys.readouterr().err


@as_root
def test_a_link_of_another_user_on_the_way_is_refused(tmp_path):
    from dali_pipes.native.trust import unsafe_folder

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(mine, target_is_directory=True)
    assert unsafe_folder(link) is None  # our link to our folder
    os.lchown(link, OTHER, OTHER)
    assert unsafe_folder(link) == f"{link}: the symbolic link belongs to uid 4242"


def test_a_library_unlike_its_sidecar_or_writable_by_others_is_built_anew(env, capsys):
    path = _built(builder.build("policy_op"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o755 and _runs(env) == 1
    size, digest, sources = Path(f"{path}.sha256").read_text().split()  # the sources' too
    assert sources[:16] == path.parent.name and len(sources) == 64
    path.write_bytes(b"evil!\n")  # the same size, other bytes
    assert _built(builder.build("policy_op")) == path and _runs(env) == 2
    assert "does not match the size and sha256 recorded beside it" in capsys.readouterr().err
    path.chmod(0o666)  # its bytes match, but anyone could have written them
    assert _built(builder.build("policy_op")) == path and _runs(env) == 3
    assert "the file is writable by group or others (mode 0o666)" in capsys.readouterr().err
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    Path(f"{path}.sha256").write_text(f"{size} {digest} {'0' * 64}\n")  # other sources
    assert _built(builder.build("policy_op")) == path and _runs(env) == 4
    assert builder.build("policy_op") == str(path) and _runs(env) == 4  # and now it is


@as_root
def test_a_library_or_sidecar_of_another_user_is_built_anew(env, capsys):
    path = _built(builder.build("policy_op"))
    for runs, f in enumerate((path, Path(f"{path}.sha256")), start=2):
        os.chown(f, OTHER, OTHER)
        assert _built(builder.build("policy_op")) == path and _runs(env) == runs
        assert f"{f}: the file belongs to uid 4242" in capsys.readouterr().err
        assert path.stat().st_uid == os.getuid()


def test_an_unwritable_cache_builds_in_this_users_private_temporary_folder(env, capsys,
                                                                          monkeypatch):
    blocker = env / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DALI_PIPES_CACHE", str(blocker / "cache"))
    path = _built(builder.build("policy_op"))
    mine = env / "tmp" / f"dali-pipes-native-{os.getuid()}"
    assert path.is_relative_to(mine) and "cannot write" in capsys.readouterr().err
    for folder in (mine, path.parent):
        st = os.lstat(folder)
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert builder.is_cached("policy_op")


@pytest.mark.parametrize("owner", [OTHER, None], ids=["another user's", "anyone's"])
def test_a_temporary_folder_made_first_by_someone_else_is_not_used(env, capsys, owner,
                                                                   monkeypatch):
    """The predictable name in the temporary folder is taken (by another user, or open to
    everyone) with a library and a sidecar that matches it: a folder of this process's own
    (mkdtemp) is used instead, never theirs."""
    if owner is not None and os.getuid() != 0:
        pytest.skip("making another user's files needs root")
    (env / "a_file").write_text("not a folder")
    planted = _plant(env, env / "a_file" / "cache", monkeypatch, uid=owner)
    monkeypatch.setenv("DALI_PIPES_CACHE", str(env / "a_file" / "cache"))
    squatted = env / "tmp" / f"dali-pipes-native-{os.getuid()}"
    assert planted.is_relative_to(squatted)
    squatted.chmod(0o777)
    if owner is not None:
        os.chown(squatted, owner, owner)
    capsys.readouterr()
    assert not builder.is_cached("policy_op")
    path = _built(builder.build("policy_op"))
    assert not path.is_relative_to(squatted) and planted.read_bytes() == b"evil\n"
    assert path.is_relative_to(env / "tmp") and path.parent.parent.name.startswith(
        "dali-pipes-native-")
    assert stat.S_IMODE(os.lstat(path.parent.parent).st_mode) == 0o700
    assert "building in a new private folder" in capsys.readouterr().err


def test_folders_on_the_way_may_be_open_only_with_the_sticky_bit(tmp_path):
    from dali_pipes.native.trust import unsafe_folder

    open_dir = tmp_path / "open"
    (open_dir / "cache").mkdir(parents=True, mode=0o700)
    open_dir.chmod(0o777)
    assert "the folder on the way is writable by group or others without the sticky bit" in (
        unsafe_folder(open_dir / "cache"))
    open_dir.chmod(0o1777)  # as /tmp: nobody else can rename or remove "cache"
    assert unsafe_folder(open_dir / "cache") is None
    assert unsafe_folder(open_dir / "cache" / ".." / "cache") is None
    assert "No such file or directory" in unsafe_folder(open_dir / "missing")
