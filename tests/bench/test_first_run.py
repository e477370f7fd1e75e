"""bench/first_run.py: the line announcing a native build gives the time the last complete
build took on this machine, and no estimate before there was one (compare.py's first run
with a real, failing build: tests/bench/test_compare_rows.py)."""
from __future__ import annotations

import dali_pipes.native.prebuild as native_prebuild
from bench.first_run import build_native, last_build_s, what_is_made


def test_the_build_line_gives_the_last_complete_build_here(tmp_path, monkeypatch):
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path))
    outcomes = [{"policy_op": "no compiler"}, {}, {}, None]

    def prebuild(say, **_):  # what dali_pipes.native.prebuild says and returns
        failed = outcomes.pop(0)
        if failed is not None:  # None: everything cached, nothing said
            say("building native operators (one time, ~16 s) ...")
            say("built 3 native operator(s) in 0 s")
        return failed or {}

    monkeypatch.setattr(native_prebuild, "prebuild", prebuild)
    said: list[str] = []
    build_native(said.append)  # a build that failed: no record
    assert said[0] == "building native operators (one time) ..." and last_build_s() is None
    build_native(said.append)  # the first complete one: still no estimate, then recorded
    assert said[2] == "building native operators (one time) ..." and last_build_s() >= 0
    build_native(said.append)
    assert said[4] == (f"building native operators (one time; the last build here took "
                       f"{last_build_s():.0f} s) ...")
    assert said[5] == "built 3 native operator(s) in 0 s"
    build_native(said.append)  # cached: nothing said
    assert len(said) == 6


def test_what_is_made():
    assert what_is_made("writing sample photos (first run only)") == "sample photos"
    assert what_is_made("writing sample clips + 200 Hz IMU") == "sample clips + 200 Hz IMU"
