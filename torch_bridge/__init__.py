"""PyTorch side: plans, the drop-in Loader over DALI graphs, and the torch reference path."""
from torch_bridge.errors import SampleError, Skipped
from torch_bridge.loader import Loader, make_loader

__all__ = ["Loader", "SampleError", "Skipped", "make_loader"]
