"""The options every benchmark script shares (which data, modality and backend), parsed by
`dali_pipes.cli.ArgumentParser` (a mistyped option is named with the closest one). Imports
neither torch nor DALI, so each script's --help is instant."""
from __future__ import annotations

import argparse

from dali_pipes.cli import ArgumentParser
from torch_bridge import registry


def loader_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark script shares: which data, modality and backend."""
    p = ArgumentParser(description=description,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modality", choices=registry.names(), default="image")
    p.add_argument("--data", help="data folder (default: built-in sample data)")
    p.add_argument("--backend", choices=["dali", "torch"], default="dali")
    return p
