"""dali_pipes.native.prebuild: the operators missing from the cache are compiled up front
behind one progress line (each line within 80 columns), nothing is printed once they are
cached, and an operator that cannot be built is named in one line."""
from __future__ import annotations

from pathlib import Path

import pytest

from dali_pipes import native
from dali_pipes.native.builder import is_cached
from dali_pipes.native.prebuild import prebuild

# a compiler that writes its output file and nothing else (the real one is covered by
# test_native.py; here the subject is the order and the lines around it)
_WRITING_CXX = """#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then echo built > "$2"; fi
  shift
done
"""
_FAILING_CXX = """#!/bin/sh
echo "fatal error: something.h: No such file or directory" >&2
exit 1
"""


def _compiler(tmp_path: Path, text: str, monkeypatch) -> None:
    if not native.enabled():
        pytest.skip("DALI_PIPES_NATIVE is off")
    cxx = tmp_path / "cxx"
    cxx.write_text(text)
    cxx.chmod(0o755)
    monkeypatch.setenv("DALI_PIPES_CXX", str(cxx))
    monkeypatch.setenv("DALI_PIPES_CACHE", str(tmp_path / "cache"))


def test_missing_operators_are_built_behind_one_line_then_nothing(tmp_path, monkeypatch):
    _compiler(tmp_path, _WRITING_CXX, monkeypatch)
    names = ("policy_op", "resize_op")
    assert not any(is_cached(n) for n in names)
    lines: list[str] = []
    assert prebuild(names, say=lines.append, jobs=2) == {}
    assert lines[0] == "building native operators (one time, ~8 s) ..."
    assert lines[1].startswith("built 2 native operator(s) in ") and len(lines) == 2
    assert all(is_cached(n) for n in names)
    again: list[str] = []
    assert prebuild(names, say=again.append) == {} and again == []  # cached: silent


def test_an_operator_that_cannot_be_built_is_named_in_one_line(tmp_path, monkeypatch):
    _compiler(tmp_path, _FAILING_CXX, monkeypatch)
    lines: list[str] = []
    failed = prebuild(("policy_op",), say=lines.append)
    assert list(failed) == ["policy_op"] and "failed (exit 1)" in failed["policy_op"]
    assert lines[0].startswith("building native operators (one time, ~8 s)")
    assert lines[-1].startswith("native operator policy_op unavailable (DALI's own ")
    assert all(len(line) <= 80 for line in lines), lines


def test_turned_off_builds_nothing(tmp_path, monkeypatch):
    _compiler(tmp_path, _FAILING_CXX, monkeypatch)
    monkeypatch.setenv("DALI_PIPES_NATIVE", "0")
    lines: list[str] = []
    assert prebuild(say=lines.append) == {} and lines == []


def test_a_hung_compiler_costs_one_timeout_not_one_per_operator(tmp_path, monkeypatch, capfd):
    """The first check or build that runs out of time stops the others of the process."""
    from dali_pipes.native import builder

    _compiler(tmp_path, '#!/bin/sh\necho "$@" >> "$0.calls"\nexec sleep 600\n', monkeypatch)
    monkeypatch.setenv("DALI_PIPES_BUILD_TIMEOUT", "1")
    monkeypatch.setattr(builder, "_stopped", [])  # this process's builds go on afterwards
    lines: list[str] = []
    failed = prebuild(native.OPERATORS, say=lines.append, jobs=1)
    assert len((tmp_path / "cxx.calls").read_text().splitlines()) == 1
    assert sorted(failed) == sorted(native.OPERATORS)
    assert sum("took over 1 s" in why for why in failed.values()) == len(failed)
    assert capfd.readouterr().err.count("no other native operator is built") == 1
    assert all(len(line) <= 80 for line in lines), lines
