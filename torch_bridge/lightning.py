"""`torch_bridge.lightning`: the Lightning DataModule (kept at this path; the module lives in
torch_bridge.integrations.lightning)."""
from torch_bridge.integrations.lightning import DaliDataModule

__all__ = ["DaliDataModule"]
