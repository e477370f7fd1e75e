"""`python -m torch_bridge`: the installed version and the tools that come with it."""
from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent

# (command, what it does, where it lives: a module name or a path in the repository)
TOOLS = (
    ("python -m torch_bridge.doctor", "check the environment (DALI, CUDA, drivers, CPUs)",
     "torch_bridge.tools.doctor"),
    ("python -m torch_bridge.check DATA", "validate a data set's files before training",
     "torch_bridge.tools.check"),
    ("python bench/compare.py", "A/B the DALI and torch backends on your data",
     "bench/compare.py"),
    ("python bench/diagnose.py", "where the data time goes: the bottleneck, with evidence",
     "bench/diagnose.py"),
    ("python bench/tune.py", "search DALI settings and write a preset",
     "bench/tune.py"),
    ("python -m dali_pipes.frames extract", "videos -> per-frame JPEG folders",
     "dali_pipes.frames"),
    ("python -m dali_pipes.pack", "pack class folders into tar shards",
     "dali_pipes.pack"),
)


def version() -> str:
    """The installed distribution's version ("unknown" when run from a bare checkout)."""
    try:
        return metadata.version("dali-pipes")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _available(where: str) -> bool:
    if "/" in where:
        return (_REPO / where).is_file()
    return importlib.util.find_spec(where) is not None


def main(argv: list[str] | None = None) -> int:
    """Print the version, the entry point and the tools found in this installation.

    Args:
        argv: command-line arguments (there are no options but --help; a mistyped one is
            named).

    Returns:
        0.
    """
    from dali_pipes.cli import ArgumentParser
    ArgumentParser(prog="python -m torch_bridge", description=__doc__).parse_args(argv)
    lines = [f"dali-pipes {version()} (torch_bridge at {Path(__file__).resolve().parent})",
             "", "In Python:  from torch_bridge import make_loader   (docs/api.md)", "",
             "Tools:"]
    tools = [(command, what) for command, what, where in TOOLS if _available(where)]
    width = max(len(command) for command, _ in tools)
    lines += [f"  {command:<{width}}  {what}" for command, what in tools]
    lines += ["", "Each tool takes --help. Documentation: docs/ (api.md, schema.md, design.md)."]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
