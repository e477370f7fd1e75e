"""DALI graphs and numpy-only readers behind the torch_bridge loaders."""
__version__ = "0.1.0"
