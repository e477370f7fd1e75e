"""dali_pipes.cli: a mistyped option is named with the closest known one, before argparse
turns it into "unrecognized arguments" or an "invalid choice" for the word after it; every
command-line tool uses it, and each one's --help imports neither torch nor DALI."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dali_pipes.cli import ArgumentParser, suggestion, unknown_option

ROOT = Path(__file__).resolve().parent.parent
KNOWN = ["--steps", "--data", "--json", "-h", "--help"]
# (module, arguments with one mistyped option, the option named, the one suggested)
TOOLS = [
    ("dali_pipes.frames", ["--qualty", "4", "extract", "a", "b"], "--qualty", "--quality"),
    ("torch_bridge.tools.check", ["data", "--deocde"], "--deocde", "--decode"),
    ("torch_bridge.tools.doctor", ["--jsno"], "--jsno", "--json"),
    ("torch_bridge.tools.apidoc", ["--wirte"], "--wirte", "--write"),
    ("bench.compare", ["--stpes", "3"], "--stpes", "--steps"),
    ("bench.diagnose", ["--compute-sm", "5"], "--compute-sm", "--compute-ms"),
    ("bench.tune", ["--parms", "num_threads"], "--parms", "--params"),
    ("bench.gpu_check", ["--dyr"], "--dyr", "--dry"),
    ("torch_bridge.__main__", ["--hlp"], "--hlp", "--help"),
]


@pytest.mark.parametrize("words, found", [
    (["--steps", "3", "--data=x"], None), (["--ste", "3"], None),  # a unique prefix
    (["--stpes", "3"], "--stpes"), (["--data", "x", "--jsn=y"], "--jsn"),
    (["--steps", "-3", "-.5"], None), (["--", "--anything"], None), (["-x"], "-x"),
    (["-hv"], None), (["-"], None)])
def test_unknown_option(words, found):
    assert unknown_option(words, KNOWN) == found


def test_suggestion_names_the_closest_or_points_at_help():
    assert suggestion("--stpes", KNOWN) == "unknown option --stpes; did you mean --steps?"
    assert suggestion("--zzz", KNOWN).endswith("see --help for the options")


def test_a_sub_command_option_before_the_sub_command_is_named(capsys):
    parser = ArgumentParser(prog="tool")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("extract").add_argument("--quality", type=int)
    assert parser.parse_args(["extract", "--quality", "4"]).quality == 4
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--qualty", "4", "extract"])
    assert stop.value.code == 2
    assert "unknown option --qualty; did you mean --quality?" in capsys.readouterr().err


@pytest.mark.parametrize("module, argv, typo, suggested", TOOLS, ids=[t[0] for t in TOOLS])
def test_every_tool_names_a_mistyped_option(module, argv, typo, suggested, capsys):
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(module).main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"unknown option {typo}; did you mean {suggested}?" in err, err


def test_help_of_every_tool_imports_neither_torch_nor_dali():
    code = ("import contextlib, importlib, io, json, sys\n"
            f"for module in {[t[0] for t in TOOLS]!r}:\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "        try:\n"
            "            importlib.import_module(module).main(['--help'])\n"
            "        except SystemExit:\n"
            "            pass\n"
            "    assert 'usage:' in out.getvalue(), module\n"
            "print(json.dumps(sorted(m for m in ('torch', 'nvidia.dali') if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
