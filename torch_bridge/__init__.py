"""PyTorch side: plans, the drop-in Loader over DALI graphs, and the torch reference path.

The public names are imported on first use, so `torch_bridge.registry` (read by command-line
tools for their choices) can be imported without torch or DALI.
"""
from __future__ import annotations

import importlib

_PUBLIC = {"Loader": "torch_bridge.loader", "SampleError": "torch_bridge.errors",
           "Skipped": "torch_bridge.errors", "make_loader": "torch_bridge.factory",
           "Sampling": "torch_bridge.order.options", "DaliBackend": "torch_bridge.backends",
           "TorchBackend": "torch_bridge.backends"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
