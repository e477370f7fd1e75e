"""The command-line tools' argument parser: argparse, with a mistyped option named and the
closest known one suggested.

    parser = ArgumentParser(prog="python -m dali_pipes.frames")
    ...
    args = parser.parse_args(argv)   # --qualty 4 -> "unknown option --qualty; did you
                                     #  mean --quality?" (exit code 2)

Plain argparse reports such an option as "unrecognized arguments" after parsing, or, when
the value after it lands on a positional with choices (a sub-command), as "invalid choice:
'4'". Here every option-like word (up to a lone "--") is looked up first, among the
options of the parser and of its sub-commands, the unique prefixes argparse accepts
included. Standard library only, so a tool's --help imports nothing heavy.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterator, Sequence

_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # a negative number is a value, not an option


def _option_strings(parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every option string of `parser` and of its sub-commands' parsers."""
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                yield from _option_strings(sub)


def unknown_option(words: Sequence[str], known: Sequence[str],
                   allow_abbrev: bool = True) -> str | None:
    """The first word of `words` (command-line arguments) that looks like an option and is
    none of `known` (nor, with `allow_abbrev`, the start of one); None when there is none.
    Words after a lone "--" are positional."""
    for word in words:
        if word == "--":
            return None
        if not word.startswith("-") or word == "-" or _NUMBER.match(word):
            continue
        name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
        if name in known:
            continue
        if allow_abbrev and name.startswith("--") and any(k.startswith(name) for k in known):
            continue
        return name
    return None


def suggestion(name: str, known: Sequence[str]) -> str:
    """"unknown option NAME" with the closest of `known`, e.g. "...; did you mean --steps?"."""
    close = difflib.get_close_matches(name, [k for k in known if k.startswith("--")] or known,
                                      n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else "see --help for the options"
    return f"unknown option {name}; {hint}"


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser that refuses a mistyped option before parsing, naming it and
    the closest known option (exit code 2, as argparse's own errors)."""

    def parse_known_args(self, args=None, namespace=None):
        words = list(sys.argv[1:] if args is None else args)
        known = sorted(set(_option_strings(self)))
        name = unknown_option(words, known, self.allow_abbrev)
        if name is not None:
            self.error(suggestion(name, known))
        return super().parse_known_args(words, namespace)


def json_object(text: str) -> dict:
    """An argparse type: `text` parsed as a JSON object (e.g. fsspec storage options);
    argparse names the option in its error otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object is needed, e.g. '{{\"anon\": true}}', "
                                         f"not {text!r}")
    return value
